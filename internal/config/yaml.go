package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orderagg/orderagg/internal/resilience"
)

// file is the shape of the --config file: one top-level key, so the file can
// grow other sections later without breaking existing ones.
type file struct {
	Dependencies Dependencies `yaml:"dependencies"`
}

// LoadDependencies reads the YAML file at path and lays its per-dependency
// settings over base: keys the file leaves out keep base's values. Every key
// is checked (an unknown one is an error naming its full path, such as
// "dependencies.coupon.breaker.windw"), every value is decoded into its field
// (durations are strings like "300ms"), and each dependency is completed with
// its defaults and validated. The error, one line, names the key at fault.
//
// base is normally DefaultDependencies(), so that removing a key from the
// file and reloading it returns that setting to its default. The rule that
// ties timeouts to the request deadline is checked by Dependencies.Validate,
// which the caller, knowing the deadline, runs next (Serve.LoadDependencies
// does both).
func LoadDependencies(path string, base Dependencies) (Dependencies, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Dependencies{}, fmt.Errorf("config file: %w", err)
	}
	deps, err := decodeDependencies(data, base)
	if err != nil {
		return Dependencies{}, fmt.Errorf("config file %s: %w", path, err)
	}
	return deps, nil
}

func decodeDependencies(data []byte, base Dependencies) (Dependencies, error) {
	root, err := parseDocument(data)
	if err != nil {
		return Dependencies{}, err
	}
	doc := file{Dependencies: base}
	if root != nil {
		if err := (decoder{lines: true}).overlay(root, reflect.ValueOf(&doc).Elem(), "", reflect.Value{}); err != nil {
			return Dependencies{}, err
		}
	}
	deps := doc.Dependencies
	for _, name := range deps.Names() {
		deps.Update(name, func(d *Dependency) { d.Config = d.Config.WithDefaults() })
	}
	if err := deps.check(); err != nil {
		return Dependencies{}, err
	}
	return deps, nil
}

// PatchDependency lays the settings in body over cur and returns the result,
// completed with defaults and validated. body is a JSON (or YAML) object with
// the keys of a dependency's section of the --config file, any subset of
// them: {"timeout":"300ms","breaker":{"sleep_window":"10s"}}. An empty body,
// anything but an object, an unknown key, a value of the wrong type and an
// invalid result are errors naming the key at fault; cur is a value, so the
// caller's settings never change, and on error nothing is returned.
//
// Setting a key to zero when zero would silently mean a generic default
// (for example "bulkhead": {"max_concurrent": 0}, which would become 50
// whatever the dependency's own value) is an error too: leave the key out to
// keep the current value. To check the rules that need the dependency's name
// or the deadline, use Dependencies.Patch, which calls this.
func PatchDependency(cur Dependency, body []byte) (Dependency, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return Dependency{}, errors.New(`empty body: send an object of settings such as {"timeout":"300ms"}`)
	}
	// JSON is YAML, except for a few details of whitespace (a tab may not
	// indent YAML); compacting valid JSON first makes every JSON body parse.
	if json.Valid(body) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, body); err != nil {
			return Dependency{}, fmt.Errorf("body: %w", err)
		}
		body = buf.Bytes()
	}
	root, err := parseDocument(body)
	if err != nil {
		return Dependency{}, fmt.Errorf("body: %w", err)
	}
	if root == nil || root.Kind != yaml.MappingNode {
		return Dependency{}, fmt.Errorf("body must be an object of settings such as {\"timeout\":\"300ms\"}, got %s", describe(root))
	}
	next := cur
	if err := (decoder{}).overlay(root, reflect.ValueOf(&next).Elem(), "", reflect.Value{}); err != nil {
		return Dependency{}, err
	}
	next.Config = next.Config.WithDefaults()
	if err := next.Validate(); err != nil {
		return Dependency{}, err
	}
	return next, nil
}

// parseDocument parses exactly one YAML document and returns its root node,
// or nil when there is none (an empty file, or only comments).
func parseDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, oneLine(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("holds more than one YAML document")
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return resolve(doc.Content[0]), nil
	}
	return resolve(&doc), nil
}

// oneLine folds yaml's occasional multi-line messages, since start-up errors
// must be one line.
func oneLine(err error) error {
	if !strings.Contains(err.Error(), "\n") {
		return err
	}
	return folded{err}
}

// folded is err with its message on one line.
type folded struct{ err error }

func (f folded) Error() string { return strings.Join(strings.Fields(f.err.Error()), " ") }
func (f folded) Unwrap() error { return f.err }

var (
	durationType     = reflect.TypeFor[time.Duration]()
	dependencyType   = reflect.TypeFor[Dependency]()
	dependenciesType = reflect.TypeFor[Dependencies]()
	// genericDefaults are the values resilience.Config.WithDefaults gives a
	// zero field. Where one is not zero, a zero in a document cannot mean
	// what it says: it would turn into this generic value.
	genericDefaults = reflect.ValueOf(Dependency{Config: resilience.Config{}.WithDefaults()})
)

// decoder lays a yaml node tree over a struct, key by key. It does the job of
// yaml's Decoder.KnownFields(true), but its errors carry the full key path
// ("dependencies.coupon.breaker.window"), which yaml's ("field windw not found
// in type resilience.BreakerConfig") do not.
type decoder struct {
	lines bool // report line numbers (files), or not (one-line request bodies)
}

func (d decoder) fail(path string, n *yaml.Node, err error) error {
	ke := &keyError{key: path, err: err}
	if d.lines && n != nil {
		ke.line = n.Line
	}
	return ke
}

// overlay writes the keys of mapping n into the struct dst (addressable),
// leaving fields whose keys n omits alone. ref, when valid, holds the generic
// defaults of dst's fields (see genericDefaults). It reports every problem it
// finds, not just the first.
func (d decoder) overlay(n *yaml.Node, dst reflect.Value, path string, ref reflect.Value) error {
	n = resolve(n)
	if isNull(n) {
		return nil // an empty section keeps everything as it was
	}
	if n.Kind != yaml.MappingNode {
		return d.fail(orRoot(path), n, fmt.Errorf("must be a mapping of keys to values, got %s", describe(n)))
	}
	if dst.Type() == dependenciesType {
		return d.overlayDependencies(n, dst.Addr().Interface().(*Dependencies), path)
	}
	if dst.Type() == dependencyType {
		ref = genericDefaults
	}
	fields := fieldsOf(dst.Type())
	byKey := make(map[string]field, len(fields))
	for _, f := range fields {
		byKey[f.key] = f
	}
	return d.eachKey(n, path, func(name string) bool { _, ok := byKey[name]; return ok }, knownKeys(fields),
		func(name, key string, v *yaml.Node) error {
			f := byKey[name]
			fv := dst.FieldByIndex(f.index)
			var fref reflect.Value
			if ref.IsValid() {
				fref = ref.FieldByIndex(f.index)
			}
			if fv.Kind() == reflect.Struct && fv.Type() != durationType {
				return d.overlay(v, fv, key, fref)
			}
			return d.leaf(v, fv, key, fref)
		})
}

// overlayDependencies lays mapping n, keyed by dependency name, over deps:
// each named dependency's settings are overlaid like any struct, and the
// ones n leaves out keep their values.
func (d decoder) overlayDependencies(n *yaml.Node, deps *Dependencies, path string) error {
	names := deps.Names()
	return d.eachKey(n, path, func(name string) bool { return slices.Contains(names, name) }, strings.Join(names, ", "),
		func(name, key string, v *yaml.Node) error {
			dep, _ := deps.Get(name) // a name the base lacks starts from zero
			if err := d.overlay(v, reflect.ValueOf(&dep).Elem(), key, reflect.Value{}); err != nil {
				return err
			}
			deps.Set(name, dep)
			return nil
		})
}

// eachKey calls set for every key of mapping n that known accepts, and
// reports every key that is not a name, is set twice or is unknown (listing
// the known ones), along with set's errors.
func (d decoder) eachKey(n *yaml.Node, path string, known func(string) bool, knownList string, set func(name, key string, v *yaml.Node) error) error {
	var errs []error
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		key := join2(path, k.Value)
		if k.Kind != yaml.ScalarNode {
			errs = append(errs, d.fail(orRoot(path), k, fmt.Errorf("keys must be names, got %s", describe(k))))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			errs = append(errs, d.fail(key, k, fmt.Errorf("set twice (first on line %d)", first)))
			continue
		}
		seen[k.Value] = k.Line
		if !known(k.Value) {
			errs = append(errs, d.fail(key, k, fmt.Errorf("unknown key (known: %s)", knownList)))
			continue
		}
		if err := set(k.Value, key, v); err != nil {
			errs = append(errs, err)
		}
	}
	return join(errs)
}

// leaf decodes one scalar into dst. The messages say what was expected in the
// document's terms ("a duration such as \"300ms\""), not in Go's.
func (d decoder) leaf(n *yaml.Node, dst reflect.Value, path string, ref reflect.Value) error {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode {
		return d.fail(path, n, fmt.Errorf("must be a single value, got %s", describe(n)))
	}
	if isNull(n) {
		return d.fail(path, n, errors.New("has no value; leave the key out to keep the current one"))
	}
	old := formatValue(dst)
	tag := n.ShortTag()
	switch {
	case dst.Type() == durationType:
		if tag != "!!str" {
			return d.fail(path, n, fmt.Errorf(`must be a duration such as "300ms", got %s`, describe(n)))
		}
		v, err := time.ParseDuration(n.Value)
		if err != nil {
			return d.fail(path, n, err)
		}
		dst.SetInt(int64(v))
	case dst.Kind() == reflect.Int:
		var v int
		if tag != "!!int" || n.Decode(&v) != nil {
			return d.fail(path, n, fmt.Errorf("must be a whole number, got %s", describe(n)))
		}
		dst.SetInt(int64(v))
	case dst.Kind() == reflect.Float64:
		var v float64
		if (tag != "!!int" && tag != "!!float") || n.Decode(&v) != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return d.fail(path, n, fmt.Errorf("must be a finite number, got %s", describe(n)))
		}
		dst.SetFloat(v)
	case dst.Kind() == reflect.Bool:
		var v bool
		if tag != "!!bool" || n.Decode(&v) != nil {
			return d.fail(path, n, fmt.Errorf("must be true or false, got %s", describe(n)))
		}
		dst.SetBool(v)
	case dst.Kind() == reflect.String:
		if tag != "!!str" {
			return d.fail(path, n, fmt.Errorf("must be a string, got %s", describe(n)))
		}
		dst.SetString(n.Value)
	default:
		// Only reachable if a settings struct gains a field of a new type.
		return d.fail(path, n, fmt.Errorf("config: no decoder for type %s", dst.Type()))
	}
	if ref.IsValid() && dst.IsZero() && !ref.IsZero() {
		return d.fail(path, n, fmt.Errorf("must not be %s: zero would silently become the generic default %s; leave the key out to keep %s",
			formatValue(dst), formatValue(ref), old))
	}
	return nil
}

// field is one settable key of a settings struct.
type field struct {
	key   string
	index []int
}

// fieldsOf lists t's keys in declaration order, following yaml tags and
// descending into ",inline" embedded structs, as yaml itself would.
func fieldsOf(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if opts == "inline" {
			for _, inner := range fieldsOf(sf.Type) {
				out = append(out, field{key: inner.key, index: append([]int{i}, inner.index...)})
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		out = append(out, field{key: name, index: []int{i}})
	}
	return out
}

func knownKeys(fields []field) string {
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	return strings.Join(keys, ", ")
}

// resolve follows aliases (*anchor) to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names what a node is, for "got …" in messages.
func describe(n *yaml.Node) string {
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case isNull(n):
		return "null"
	case n.ShortTag() == "!!str":
		return fmt.Sprintf("%q", n.Value)
	}
	return n.Value
}

func formatValue(v reflect.Value) string {
	if v.Type() == durationType {
		return formatDuration(time.Duration(v.Int()))
	}
	return fmt.Sprint(v.Interface())
}

func join2(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}
