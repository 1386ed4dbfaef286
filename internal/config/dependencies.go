package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Dependency is one dependency's settings: its resilience guard and, for a
// downstream, how old a last-good answer may be served. The yaml names are
// the keys of its --config section and of the admin PATCH body, where
// "timeout: auto" sets AutoTimeout.
type Dependency struct {
	resilience.Config `yaml:",inline"`
	// CacheMaxAge is the age beyond which a last-good answer is treated as
	// missing: positive for every downstream, zero for "cache".
	CacheMaxAge time.Duration `yaml:"cache_max_age" json:"cache_max_age"`
}

// NameCache names the guard of the last-good reads made when a downstream fails.
const NameCache = "cache"

// ErrUnknownDependency is Patch's error for a name not in Names.
var ErrUnknownDependency = errors.New("unknown dependency")

// Dependencies are the settings of every registered downstream, by name,
// and of NameCache. Start from DefaultDependencies.
type Dependencies map[string]Dependency

// Names returns the registered downstreams in page order, then cache.
func (Dependencies) Names() []string { return append(downstream.Names(), NameCache) }

// Get returns the named dependency's settings, and false for an unknown name.
func (d Dependencies) Get(name string) (Dependency, bool) { dep, ok := d[name]; return dep, ok }

// Update changes the named dependency's settings with f; false: d lacks it.
func (d Dependencies) Update(name string, f func(*Dependency)) bool {
	dep, ok := d[name]
	if ok {
		f(&dep)
		d[name] = dep
	}
	return ok
}

// DefaultDependencies is DefaultDependenciesFor(DefaultMaxInflight).
func DefaultDependencies() Dependencies { return DefaultDependenciesFor(DefaultMaxInflight) }

// DefaultDependenciesFor returns the registry entries' Defaults and
// CacheDefaults, every field filled in. A bulkhead they leave unset never
// refuses a call while maxInflight pages are admitted: maxInflight slots for
// a downstream, and for the cache one read per section of every page.
func DefaultDependenciesFor(maxInflight int) Dependencies {
	cache := CacheDefaults
	cache.Bulkhead.MaxConcurrent = cmp.Or(cache.Bulkhead.MaxConcurrent, maxInflight*len(downstream.Names()))
	d := Dependencies{NameCache: {Config: cache.WithDefaults()}}
	for _, e := range downstream.Registered() {
		c := e.Defaults
		c.Bulkhead.MaxConcurrent = cmp.Or(c.Bulkhead.MaxConcurrent, maxInflight)
		d[e.Name] = Dependency{Config: c.WithDefaults(), CacheMaxAge: e.CacheMaxAge}
	}
	return d
}

// CacheDefaults are the last-good reads' own settings: two 50ms reads fit
// the 100ms --reserve, and a retry would eat it.
var CacheDefaults = resilience.Config{
	Timeout: 50 * time.Millisecond,
	Retry:   resilience.RetryConfig{MaxAttempts: 1},
}

// Bounds are the page's time limits that every dependency's settings must fit.
type Bounds struct{ Deadline, Reserve time.Duration }

// CallsEnd is when, after a page starts, its calls are cut: Deadline − Reserve.
func (b Bounds) CallsEnd() time.Duration { return b.Deadline - b.Reserve }

// Validate returns the first invalid setting, in Names order, as one line
// "key: what is wrong". Beside resilience.Config.Validate's rules it refuses
// what would blind a breaker: a timeout or timeout_max not before
// b.CallsEnd(), and a reserve or fallback_timeout not above cache.timeout.
func (d Dependencies) Validate(b Bounds) error {
	reserve, cache := "--reserve ("+EnvName(EnvPrefix, "reserve")+")", d[NameCache]
	blind := fmt.Sprintf("must be shorter than --deadline %v minus --reserve %v = %v, or a hang is cut as the page's DEADLINE, which the breaker never sees",
		b.Deadline, b.Reserve, b.CallsEnd())
	switch {
	case b.Reserve >= b.Deadline:
		return fmt.Errorf("%s: %v must be shorter than --deadline %v", reserve, b.Reserve, b.Deadline)
	case b.Reserve <= cache.Timeout:
		return fmt.Errorf("%s: %v must be longer than dependencies.cache.timeout %v, the bound of a last-good read made within it", reserve, b.Reserve, cache.Timeout)
	}
	for _, name := range d.Names() {
		key, dep := "dependencies."+name+".", d[name]
		if err := dep.Config.WithDefaults().Validate(); err != nil { // as the guard will; errors.Join's "key: message" lines
			return errors.New(key + strings.SplitN(err.Error(), "\n", 2)[0])
		}
		switch {
		case dep.Timeout >= b.CallsEnd():
			return fmt.Errorf("%stimeout: %v %s", key, dep.Timeout, blind)
		case dep.TimeoutMax >= b.CallsEnd():
			return fmt.Errorf("%stimeout_max: %v %s", key, dep.TimeoutMax, blind)
		case name == NameCache && dep.CacheMaxAge != 0:
			return fmt.Errorf("%scache_max_age: does not apply to the cache itself; leave it out", key)
		case name != NameCache && dep.CacheMaxAge <= 0:
			return fmt.Errorf("%scache_max_age: must be positive, got %v", key, dep.CacheMaxAge)
		case name != NameCache && dep.FallbackTimeout <= cache.Timeout:
			return fmt.Errorf("%sfallback_timeout: %v must be longer than dependencies.cache.timeout %v", key, dep.FallbackTimeout, cache.Timeout)
		}
	}
	return nil
}

// Patch returns a copy of d with the named dependency's settings patched by
// body, a JSON (or YAML) object of keys of its --config section, validated
// against b; d is never modified. An unknown name matches
// ErrUnknownDependency; every other error names the line in body.
func (d Dependencies) Patch(name string, body []byte, b Bounds) (Dependencies, error) {
	dep, ok := d[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownDependency, name, strings.Join(d.Names(), ", "))
	}
	if json.Valid(body) { // JSON is YAML but for tabs: compact it first
		var buf bytes.Buffer
		_ = json.Compact(&buf, body)
		body = buf.Bytes()
	}
	switch err := decode(body, &dep); {
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf(`dependencies.%s: empty body: send an object of settings such as {"timeout":"300ms"}`, name)
	case err != nil:
		return nil, fmt.Errorf("dependencies.%s: %w", name, err)
	}
	out := maps.Clone(d)
	out[name] = dep
	return out.valid(b, body, "dependencies."+name+".")
}

// lay returns data, a --config document, laid over d and validated against b.
func (d Dependencies) lay(data []byte, b Bounds) (Dependencies, error) {
	doc := reflect.New(keyed(keyed(reflect.TypeFor[Dependency](), d.Names()...), "dependencies")).Elem()
	sections := doc.Field(0) // the decoder refuses other names
	for i, name := range d.Names() {
		sections.Field(i).Set(reflect.ValueOf(d[name]))
	}
	if err := decode(data, doc.Addr().Interface()); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	out := Dependencies{}
	for i, name := range d.Names() {
		out[name] = sections.Field(i).Interface().(Dependency)
	}
	return out.valid(b, data, "")
}

// keyed returns a struct type with one field of type t per key, named by it in YAML.
func keyed(t reflect.Type, keys ...string) reflect.Type {
	fields := make([]reflect.StructField, len(keys))
	for i, k := range keys {
		fields[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: t, Tag: reflect.StructTag(`yaml:"` + k + `"`)}
	}
	return reflect.StructOf(fields)
}

// UnmarshalYAML decodes a --config section over d with the calling, strict
// decoder. "timeout: auto" (any case) turns AutoTimeout on and keeps
// Timeout, where the adaptive sub-budget starts; a duration turns it off.
func (d *Dependency) UnmarshalYAML(unmarshal func(any) error) error {
	var n node
	if err := unmarshal(&n); err != nil {
		return err
	}
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Value == "timeout" && v.Kind == yaml.ScalarNode && v.ShortTag() != "!!null" {
			if d.AutoTimeout = strings.EqualFold(v.Value, "auto"); d.AutoTimeout {
				*v = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"} // decoded below as "leave Timeout alone"
			}
		}
	}
	type section Dependency // without this method
	return unmarshal((*section)(d))
}

// node receives the decoder's own node, not a copy: what unmarshal decodes
// next sees a change made to it.
type node struct{ *yaml.Node }

func (n *node) UnmarshalYAML(v *yaml.Node) error { n.Node = v; return nil }

// decode lays data, a YAML (or JSON) document, over v, refusing unknown
// keys; an empty document is io.EOF. Errors are one line.
func decode(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(v)
	if te, ok := errors.AsType[*yaml.TypeError](err); ok {
		for i, e := range te.Errors {
			te.Errors[i] = notFound.ReplaceAllString(e, `unknown key "$1"`)
		}
		return errors.New(strings.Join(te.Errors, "; "))
	}
	return err
}

var notFound = regexp.MustCompile(`field (\S+) not found in type .*`)

// valid returns d if valid against b, else the error with its key's line in
// data, a document of the keys under prefix.
func (d Dependencies) valid(b Bounds, data []byte, prefix string) (Dependencies, error) {
	err := d.Validate(b)
	if err == nil {
		return d, nil
	}
	key, msg, _ := strings.Cut(err.Error(), ": ")
	var n yaml.Node
	_ = yaml.Unmarshal(data, &n)
	for _, k := range strings.Split(strings.TrimPrefix(key, prefix), ".") {
		var m map[string]yaml.Node
		if n.Decode(&m) != nil || m[k].Kind == 0 {
			return nil, err
		}
		n = m[k]
	}
	return nil, fmt.Errorf("%s (line %d): %s", key, n.Line, msg)
}

// Settings returns d as maps keyed like the --config file, with durations
// such as "300ms", "10m", "24h": what the admin API shows, and a PATCH body
// that gives the same settings back.
func (d Dependency) Settings() map[string]any {
	var out map[string]any
	data, err := yaml.Marshal(d)
	if err != nil || yaml.Unmarshal(data, &out) != nil {
		panic("config: settings do not round-trip") // a struct of numbers always does
	}
	if d.AutoTimeout {
		out["timeout"] = "auto"
	}
	return shorten(out)
}

// shorten writes durations as people do: "10m", not "10m0s".
func shorten(m map[string]any) map[string]any {
	for k, v := range m {
		switch v := v.(type) {
		case map[string]any:
			shorten(v)
		case string: // drops zero seconds, then zero minutes
			m[k] = strings.Replace(strings.Replace(v, "m0s", "m", 1), "h0m", "h", 1)
		}
	}
	return m
}
