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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orderagg/orderagg/internal/resilience"
)

// LoadDependencies reads the YAML file at path (one top-level key,
// dependencies, then one section per name of Names()) and lays it over base,
// normally DefaultDependencies(), so a key removed from the file returns to
// its default on reload. An unknown key, a value of the wrong type and an
// invalid result are one-line errors naming the key and its line
// ("dependencies.coupon.breaker.windw: unknown key (known: window, …) (line
// 4)"). The deadline rule is Dependencies.Validate's, run next by the caller
// (Serve.LoadDependencies does both).
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
	// The section names come from the registry, so the struct yaml decodes
	// into — one field per name, filled from base — is built at run time.
	names := base.Names()
	fields := make([]reflect.StructField, len(names))
	for i, name := range names {
		fields[i] = reflect.StructField{Name: fmt.Sprintf("D%d", i), Type: reflect.TypeFor[Dependency](), Tag: reflect.StructTag(`yaml:"` + name + `"`)}
	}
	doc := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "Dependencies", Type: reflect.StructOf(fields), Tag: `yaml:"dependencies"`}}))
	sections := doc.Elem().Field(0)
	for i, name := range names {
		dep, _ := base.Get(name) // a name the base lacks starts from zero
		sections.Field(i).Set(reflect.ValueOf(dep))
	}
	_, modes, err := decodeStrict(data, doc.Interface(), true, 2)
	if err != nil {
		return Dependencies{}, err
	}
	var deps Dependencies
	for i, name := range names {
		dep := sections.Field(i).Interface().(Dependency)
		if auto, ok := modes["dependencies."+name]; ok {
			dep.AutoTimeout = auto
		}
		dep.Config = dep.Config.WithDefaults()
		deps.Set(name, dep)
	}
	if err := deps.check(); err != nil {
		return Dependencies{}, err
	}
	return deps, nil
}

// PatchDependency lays body, a JSON (or YAML) object with any of the keys of
// a dependency's section of the --config file, over cur and returns the
// result, completed with defaults and validated; errors name the key at
// fault. A zero that would silently become a generic default
// ({"bulkhead":{"max_concurrent":0}} would mean 50) is refused too. The
// rules that need the name or the deadline are Dependencies.Patch's.
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
	next := cur
	root, modes, err := decodeStrict(body, &next, false, 0)
	switch {
	case root == nil && err == nil, root != nil && root.Kind != yaml.MappingNode:
		return Dependency{}, fmt.Errorf("body must be an object of settings such as {\"timeout\":\"300ms\"}, got %s", redact(describe(root)))
	case errors.As(err, new(syntaxError)):
		return Dependency{}, fmt.Errorf("body: %w", err)
	case err != nil:
		return Dependency{}, err
	}
	if auto, ok := modes[""]; ok {
		next.AutoTimeout = auto
	}
	next.Config = next.Config.WithDefaults()
	if err := next.Validate(); err != nil {
		return Dependency{}, err
	}
	return next, nil
}

// syntaxError is yaml's complaint about the document itself, on one line
// (start-up errors must be one line).
type syntaxError string

func (e syntaxError) Error() string { return string(e) }

func oneLine(err error) error {
	return syntaxError(redact(strings.Join(strings.Fields(err.Error()), " ")))
}

// decodeStrict lays the one YAML document in data over *dst, which holds the
// values in force: yaml.v3 decodes it with KnownFields(true), so an unknown
// key is an error and a key left out keeps its value. It returns the root
// node (nil for an empty document). yaml's messages name a line and a Go type
// ("field windw not found in type resilience.BreakerConfig"); they are
// reworded to name the key, with its line when lines is set. depth is how
// many path segments lead to a Dependency's keys (2 in a file, 0 in a body).
//
// A dependency's "timeout" may also be "auto" (resilience.TimeoutSetting),
// which its time.Duration field cannot hold: modes maps the path of each
// section that sets timeout ("dependencies.logistics", or "" in a body) to
// whether it is auto, and the caller sets AutoTimeout from it. An auto
// leaves the Duration as it was: where the adaptive sub-budget starts.
func decodeStrict(data []byte, dst any, lines bool, depth int) (root *yaml.Node, modes map[string]bool, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, oneLine(err)
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return nil, nil, errors.New("holds more than one YAML document")
	}
	if len(doc.Content) == 0 {
		return nil, nil, nil // only comments
	}
	root = doc.Content[0]
	var before yaml.Node
	if err := before.Encode(dst); err != nil {
		return root, nil, err
	}
	r := reworder{entries: index(root, ""), schema: &before, lines: lines}
	modes = r.timeoutModes(depth)
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	err = strict.Decode(dst)
	var te *yaml.TypeError
	if err != nil && !errors.As(err, &te) {
		return root, nil, oneLine(err)
	}
	if te != nil {
		for _, msg := range te.Errors {
			r.reword(msg)
		}
	}
	var after yaml.Node
	if err := after.Encode(dst); err != nil {
		return root, nil, err
	}
	r.laxities(&after, depth)
	return root, modes, join(r.errs)
}

// timeoutModes finds each dependency's "timeout" key (depth segments
// down) and says whether it is "auto"; those entries are marked so that
// yaml's complaint about "auto" in a Duration is not reported.
func (r *reworder) timeoutModes(depth int) map[string]bool {
	modes := map[string]bool{}
	for _, e := range r.entries {
		if e.key == nil || e.key.Value != "timeout" || strings.Count(e.path, ".") != depth ||
			lookup(r.schema, e.parent) == nil || e.val.Kind != yaml.ScalarNode {
			continue
		}
		ts, err := resilience.ParseTimeoutSetting(e.val.Value)
		e.auto = err == nil && ts.Auto && e.val.ShortTag() == "!!str"
		modes[e.parent] = e.auto
	}
	return modes
}

// entry is one key of a document, with its path and value.
type entry struct {
	path     string
	parent   string     // path without the last key (which may hold dots)
	key, val *yaml.Node // key is nil for the document's root
	reported bool
	auto     bool // a dependency's "timeout: auto", see timeoutModes
}

// index lists every key of the document under n, depth first, aliases
// followed.
func index(n *yaml.Node, path string) []*entry {
	out := []*entry{{path: path, val: resolve(n)}}
	seen := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if n = resolve(n); n.Kind != yaml.MappingNode || seen[n] {
			return
		}
		seen[n] = true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], resolve(n.Content[i+1])
			p := join2(path, k.Value)
			out = append(out, &entry{path: p, parent: path, key: k, val: v})
			walk(v, p)
		}
	}
	walk(n, path)
	return out
}

// reworder turns yaml's type errors into errors naming the key.
type reworder struct {
	entries []*entry
	schema  *yaml.Node // the destination before decoding, as YAML
	lines   bool
	errs    []error
}

var (
	unknownRe = regexp.MustCompile(`^line (\d+): field (.+?) not found in type `)
	twiceRe   = regexp.MustCompile(`^line (\d+): mapping key (".*") already defined at line (\d+)$`)
	typeRe    = regexp.MustCompile("^line (\\d+): cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
)

func (r *reworder) reword(msg string) {
	if m := unknownRe.FindStringSubmatch(msg); m != nil {
		if e := r.find(m[1], func(e *entry) bool { return e.key != nil && e.key.Value == m[2] }, true); e != nil {
			r.fail(e, e.key, fmt.Errorf("unknown key (known: %s)", strings.Join(keysOf(lookup(r.schema, e.parent)), ", ")))
			return
		}
	}
	if m := twiceRe.FindStringSubmatch(msg); m != nil {
		name, _ := strconv.Unquote(m[2])
		if e := r.find(m[1], func(e *entry) bool { return e.key != nil && e.key.Value == name }, true); e != nil {
			r.fail(e, e.key, fmt.Errorf("set twice (first on line %s)", m[3]))
			return
		}
	}
	if m := typeRe.FindStringSubmatch(msg); m != nil {
		// Several values may sit on one line ({"a":1,"b":{"c":2}}): the one
		// meant has yaml's tag and text, and is a section exactly when the
		// Go type is a struct.
		scalar := slices.Contains([]string{"time.Duration", "int", "float64", "bool", "string"}, m[4])
		e := r.find(m[1], func(e *entry) bool {
			want := lookup(r.schema, e.path)
			return e.val.ShortTag() == m[2] && (m[3] == "" || shorten(e.val.Value) == m[3]) &&
				want != nil && (want.Kind == yaml.MappingNode) != scalar
		}, false)
		if e != nil && e.auto {
			e.reported = true // not wrong: the caller sets AutoTimeout
			return
		}
		if e != nil {
			r.fail(e, e.val, r.wrongType(e, m[4]))
			return
		}
	}
	r.errs = append(r.errs, errors.New(redact(msg))) // not a form known here: yaml's own words
}

// find returns the first entry not yet reported whose key (byKey) or value
// sits on line and matches.
func (r *reworder) find(line string, match func(*entry) bool, byKey bool) *entry {
	n, _ := strconv.Atoi(line)
	for _, e := range r.entries {
		at := e.val
		if byKey {
			at = e.key
		}
		if !e.reported && at != nil && at.Line == n && match(e) {
			return e
		}
	}
	return nil
}

// wrongType says what the key at e wants, in the document's terms.
func (r *reworder) wrongType(e *entry, goType string) error {
	got := describe(e.val)
	switch want := lookup(r.schema, e.path); {
	case want != nil && want.Kind == yaml.MappingNode:
		return fmt.Errorf("must be a mapping of keys to values, got %s", got)
	case e.val.Kind != yaml.ScalarNode:
		return fmt.Errorf("must be a single value, got %s", got)
	case goType == "time.Duration" && e.val.ShortTag() == "!!str" && e.key != nil && e.key.Value == "timeout":
		_, err := resilience.ParseTimeoutSetting(e.val.Value)
		return err
	case goType == "time.Duration" && e.val.ShortTag() == "!!str":
		_, err := time.ParseDuration(e.val.Value)
		return err
	case goType == "time.Duration":
		return fmt.Errorf(`must be a duration such as "300ms", got %s`, got)
	case strings.HasPrefix(goType, "int"):
		return fmt.Errorf("must be a whole number, got %s", got)
	case strings.HasPrefix(goType, "float"):
		return fmt.Errorf("must be a finite number, got %s", got)
	case goType == "bool":
		return fmt.Errorf("must be true or false, got %s", got)
	}
	return fmt.Errorf("cannot be %s", got)
}

// genericDefaults are the values resilience.Config.WithDefaults gives a
// zero field, as YAML. Where one is not zero, a zero in a document cannot
// mean what it says: it would turn into this generic value.
var genericDefaults = func() *yaml.Node {
	var n yaml.Node
	if err := n.Encode(Dependency{Config: resilience.Config{}.WithDefaults()}); err != nil {
		panic(err)
	}
	return &n
}()

// laxities refuses what yaml decodes without complaint but would not mean
// what it says: a key without a value (yaml keeps the old one), a fraction
// for a whole number (yaml truncates it), a number that is not finite, and a
// zero that WithDefaults would replace by a generic default.
func (r *reworder) laxities(after *yaml.Node, depth int) {
	for _, e := range r.entries {
		was := lookup(r.schema, e.path)
		if e.reported || e.key == nil || was == nil || was.Kind != yaml.ScalarNode {
			continue
		}
		now, v := lookup(after, e.path), e.val
		var f, kept float64
		isFloat := v.ShortTag() == "!!float" && v.Decode(&f) == nil && now != nil && now.Decode(&kept) == nil
		switch {
		case v.ShortTag() == "!!null":
			r.fail(e, v, errors.New("has no value; leave the key out to keep the current one"))
		case isFloat && (math.IsNaN(f) || math.IsInf(f, 0)):
			r.fail(e, v, fmt.Errorf("must be a finite number, got %s", describe(v)))
		case isFloat && f != kept: // yaml truncated it into a whole-number field
			r.fail(e, v, fmt.Errorf("must be a whole number, got %s", describe(v)))
		default:
			rel := strings.SplitN(e.path, ".", depth+1)
			gen := lookup(genericDefaults, rel[len(rel)-1])
			if now != nil && gen != nil && isZero(now) && !isZero(gen) {
				r.fail(e, v, fmt.Errorf("must not be %s: zero would silently become the generic default %s; leave the key out to keep %s",
					show(now), show(gen), show(was)))
			}
		}
	}
}

func (r *reworder) fail(e *entry, at *yaml.Node, err error) {
	e.reported = true
	// Keys and values are quoted back: a URL pasted by mistake must not show
	// its password.
	ke := &keyError{key: redact(orRoot(e.path)), err: errors.New(redact(err.Error()))}
	if r.lines {
		ke.line = at.Line
	}
	r.errs = append(r.errs, ke)
}

// lookup returns the node at the dotted path under the mapping n, or nil.
func lookup(n *yaml.Node, path string) *yaml.Node {
	if n.Kind == yaml.DocumentNode {
		n = n.Content[0]
	}
	for key := range strings.SplitSeq(path, ".") {
		if key == "" {
			continue
		}
		var next *yaml.Node
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

func keysOf(n *yaml.Node) []string {
	var keys []string
	for i := 0; n != nil && i+1 < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i].Value)
	}
	return keys
}

func isZero(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && (n.Value == "0" || n.Value == "0s" || n.Value == "false")
}

// show writes a settings value the way the file does: durations (the only
// strings in the settings) in their largest whole unit.
func show(n *yaml.Node) string {
	if d, err := time.ParseDuration(n.Value); err == nil && n.ShortTag() == "!!str" {
		return formatDuration(d)
	}
	return n.Value
}

// shorten is how yaml abbreviates a value in its messages.
func shorten(v string) string {
	if len(v) > 10 {
		return v[:7] + "..."
	}
	return v
}

// resolve follows aliases (*anchor) to the node they stand for.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// describe names what a node is, for "got …" in messages.
func describe(n *yaml.Node) string {
	switch n = resolve(n); {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.ShortTag() == "!!null":
		return "null"
	case n.ShortTag() == "!!str":
		return fmt.Sprintf("%q", n.Value)
	}
	return n.Value
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
