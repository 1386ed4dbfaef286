package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// KeyError is a problem with one setting: its key path
// ("dependencies.coupon.breaker.window", or a flag such as "--reserve") and,
// when it comes from a file, the key's line (0 otherwise).
type KeyError struct {
	Key  string
	Line int
	Err  error
}

func (e *KeyError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s (line %d): %v", e.Key, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Key, e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }

// LoadFile reads the YAML file at path, one top-level key, dependencies,
// then one section per name of Names(), and lays it over base (normally
// DefaultDependencies(), so a key removed from the file returns to its
// default on reload). yaml.v3 decodes it strictly: an unknown key or a value
// of the wrong type is an error naming the key and its line, as is every
// problem Validate finds against b.
func LoadFile(path string, base Dependencies, b Bounds) (Dependencies, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Dependencies{}, fmt.Errorf("config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Dependencies{}, fmt.Errorf("config file %s: %s", path, oneLine(err))
	}
	deps, err := overlay(data, &doc, base)
	if err == nil {
		err = deps.Validate(b)
	}
	if err != nil {
		return Dependencies{}, fmt.Errorf("config file %s: %w", path, located(&doc, err))
	}
	return deps, nil
}

// overlay checks data strictly, then decodes each of doc's sections over
// the settings base holds for it.
func overlay(data []byte, doc *yaml.Node, base Dependencies) (Dependencies, error) {
	var strict struct {
		Dependencies map[string]Dependency `yaml:"dependencies"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&strict); err != nil && !errors.Is(err, io.EOF) {
		return Dependencies{}, err
	}
	var errs errList
	deps := base
	_, sections := entry(doc, "dependencies")
	for i := 0; sections != nil && i+1 < len(sections.Content); i += 2 {
		k, v := sections.Content[i], sections.Content[i+1]
		dep, ok := base.Get(k.Value)
		if !ok {
			errs = append(errs, &KeyError{Key: "dependencies." + k.Value, Line: k.Line,
				Err: fmt.Errorf("unknown dependency (known: %s)", strings.Join(base.Names(), ", "))})
			continue
		}
		if err := v.Decode(&dep); err != nil {
			errs = append(errs, err)
		}
		deps.Set(k.Value, dep)
	}
	return deps, errs.orNil()
}

// decodeSection lays body, one dependency's section, over cur, strictly.
func decodeSection(body []byte, cur Dependency) (Dependency, error) {
	if json.Valid(body) { // JSON is YAML, but for tabs: compact it first
		var buf bytes.Buffer
		_ = json.Compact(&buf, body)
		body = buf.Bytes()
	}
	dec := yaml.NewDecoder(bytes.NewReader(body))
	dec.KnownFields(true)
	next := cur
	var te *yaml.TypeError
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return Dependency{}, errors.New(`empty body: send an object of settings such as {"timeout":"300ms"}`)
	case errors.As(err, &te):
		return Dependency{}, errors.New(strings.Join(te.Errors, "; "))
	case err != nil:
		return Dependency{}, oneLine(err)
	}
	return next, nil
}

// section is Dependency without its UnmarshalYAML.
type section Dependency

// UnmarshalYAML lays a section of settings over d, strictly when the
// decoder is (it uses yaml's callback form, which keeps the decoder's
// options). A "timeout" of "auto" sets AutoTimeout and keeps Timeout, where
// the adaptive sub-budget starts; a duration turns AutoTimeout off.
func (d *Dependency) UnmarshalYAML(unmarshal func(any) error) error {
	var probe struct {
		Timeout yaml.Node      `yaml:"timeout"`
		Rest    map[string]any `yaml:",inline"`
	}
	_ = unmarshal(&probe) // the decode below reports what is wrong
	err := unmarshal((*section)(d))
	if t := probe.Timeout; t.Kind == yaml.ScalarNode && t.ShortTag() != "!!null" {
		d.AutoTimeout = strings.EqualFold(t.Value, "auto")
		// "auto" is no time.Duration: drop yaml's complaint about that value.
		var te *yaml.TypeError
		if errors.As(err, &te) && d.AutoTimeout {
			if i := slices.Index(te.Errors, fmt.Sprintf("line %d: cannot unmarshal !!str `%s` into time.Duration", t.Line, t.Value)); i >= 0 {
				te.Errors = slices.Delete(te.Errors, i, i+1)
			}
			if len(te.Errors) == 0 {
				return nil
			}
		}
	}
	return err
}

// located turns yaml's type errors ("line 4: field windw not found in type
// …") into KeyErrors naming the key on that line of doc, and gives other
// KeyErrors their key's line.
func located(doc *yaml.Node, err error) error {
	var out errList
	for _, e := range unjoin(err) {
		var te *yaml.TypeError
		var ke *KeyError
		if errors.As(e, &ke) && ke.Line == 0 {
			ke.Line = lineOf(doc, ke.Key)
		}
		if !errors.As(e, &te) {
			out = append(out, e)
			continue
		}
		for _, msg := range te.Errors {
			var line int
			fmt.Sscanf(msg, "line %d:", &line)
			out = append(out, &KeyError{Key: keyAt(doc, line, ""), Line: line, Err: errors.New(strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", line)))})
		}
	}
	return out.orNil()
}

// keyAt is the dotted path of the first key on line under n.
func keyAt(n *yaml.Node, line int, path string) string {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		p := strings.TrimPrefix(path+"."+n.Content[i].Value, ".")
		if n.Content[i].Line == line {
			return p
		}
		if found := keyAt(n.Content[i+1], line, p); found != "" {
			return found
		}
	}
	if path == "" {
		return "(top level)"
	}
	return ""
}

// entry returns the key and value nodes of key in the mapping n, or nils.
func entry(n *yaml.Node, key string) (k, v *yaml.Node) {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// lineOf is the line of the key at the dotted path under doc, 0 if absent.
func lineOf(doc *yaml.Node, path string) int {
	k, n := (*yaml.Node)(nil), doc
	for name := range strings.SplitSeq(path, ".") {
		if k, n = entry(n, name); k == nil {
			return 0
		}
	}
	return k.Line
}

// errList is several errors on one line: start-up errors must be one line.
type errList []error

func (l errList) Error() string {
	parts := make([]string, len(l))
	for i, err := range l {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (l errList) Unwrap() []error { return l }

func (l errList) orNil() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// unjoin lists the errors err joins (itself if it joins none).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func oneLine(err error) error { return errors.New(strings.Join(strings.Fields(err.Error()), " ")) }
