package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Dependency is one dependency's settings: its resilience guard and, for a
// downstream, how old a last-good answer may be and still be served. The
// yaml names are the keys of its section of the --config file and of the
// admin API's PATCH body, where "timeout: auto" sets AutoTimeout.
type Dependency struct {
	resilience.Config `yaml:",inline"`
	// CacheMaxAge is the age beyond which a last-good answer is treated as
	// missing: positive for every downstream, zero for "cache".
	CacheMaxAge time.Duration `yaml:"cache_max_age" json:"cache_max_age"`
}

// NameCache names the guard of the last-good reads made when a downstream
// fails; the downstreams' names are internal/downstream's registry's.
const NameCache = "cache"

// ErrUnknownDependency is Patch's error for a name not in Names.
var ErrUnknownDependency = errors.New("unknown dependency")

// Dependencies are the settings of every registered downstream, by name,
// and of the last-good store's guard, NameCache. Start from
// DefaultDependencies; Patch returns a new map, Update changes this one.
type Dependencies map[string]Dependency

// Names returns the registered downstreams in page order, then cache.
func (Dependencies) Names() []string { return append(downstream.Names(), NameCache) }

// Get returns the named dependency's settings, and false for an unknown name.
func (d Dependencies) Get(name string) (Dependency, bool) {
	dep, ok := d[name]
	return dep, ok
}

// Update changes the named dependency's settings with f, and reports false
// for a name d does not hold.
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
	d := Dependencies{NameCache: {Config: CacheDefaults}}
	for _, e := range downstream.Registered() {
		d[e.Name] = Dependency{Config: e.Defaults, CacheMaxAge: e.CacheMaxAge}
	}
	for name, dep := range d {
		if dep.Bulkhead.MaxConcurrent == 0 {
			dep.Bulkhead.MaxConcurrent = maxInflight
			if name == NameCache {
				dep.Bulkhead.MaxConcurrent *= len(downstream.Names())
			}
		}
		dep.Config = dep.Config.WithDefaults()
		d[name] = dep
	}
	return d
}

// CacheDefaults are the last-good reads' own settings: two 50ms reads fit
// the 100ms --reserve, and a retry would eat it.
var CacheDefaults = resilience.Config{
	Timeout: 50 * time.Millisecond,
	Retry:   resilience.RetryConfig{MaxAttempts: 1},
}

// Bounds are the page's time limits (--deadline, --reserve) that every
// dependency's settings must fit.
type Bounds struct{ Deadline, Reserve time.Duration }

// CallsEnd is when, after a page starts, its calls are cut: Deadline − Reserve.
func (b Bounds) CallsEnd() time.Duration { return b.Deadline - b.Reserve }

// Validate returns the first invalid setting, in Names order, as one line
// "key: what is wrong". Beside resilience.Config.Validate's rules it refuses
// what would blind a breaker: a timeout or timeout_max at or past
// b.CallsEnd() (the call would end as the page's DEADLINE), and a reserve
// or fallback_timeout not longer than cache.timeout.
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
		key := "dependencies." + name + "."
		dep, ok := d[name]
		if !ok {
			return fmt.Errorf("dependencies.%s: missing (start from DefaultDependencies)", name)
		}
		if err := dep.Config.Validate(); err != nil { // errors.Join's "key: message" lines
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
// body, a JSON (or YAML) object with any keys of its --config section, the
// whole validated against b; d is never modified. An unknown name matches
// ErrUnknownDependency; every other error names the key and its line in body.
func (d Dependencies) Patch(name string, body []byte, b Bounds) (Dependencies, error) {
	if _, ok := d[name]; !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownDependency, name, strings.Join(d.Names(), ", "))
	}
	if json.Valid(body) { // JSON is YAML but for tabs: compact it first
		var buf bytes.Buffer
		_ = json.Compact(&buf, body)
		body = buf.Bytes()
	}
	n, err := parse(body)
	switch {
	case err != nil:
		return nil, fmt.Errorf("dependencies.%s: %w", name, err)
	case n.Line == 0:
		return nil, fmt.Errorf(`dependencies.%s: empty body: send an object of settings such as {"timeout":"300ms"}`, name)
	}
	return d.lay(mapping("dependencies", mapping(name, n)), b)
}

// Settings returns d as a tree of maps keyed like the --config file, with
// durations in their short form ("300ms", "10m", "24h"): what the admin API
// shows, and a PATCH body that gives the same settings back.
func (d Dependency) Settings() map[string]any {
	var n yaml.Node
	var out map[string]any
	if err := n.Encode(d); err != nil || n.Decode(&out) != nil {
		panic("config: settings do not round-trip") // a struct of numbers always does
	}
	if d.AutoTimeout {
		out["timeout"] = "auto"
	}
	return shorten(out)
}

// shorten writes the durations in m as people write them: "10m", not "10m0s".
func shorten(m map[string]any) map[string]any {
	for k, v := range m {
		switch v := v.(type) {
		case map[string]any:
			shorten(v)
		case string:
			for _, unit := range []string{"m0s", "h0m"} {
				if strings.HasSuffix(v, unit) {
					v = v[:len(v)-2]
				}
			}
			m[k] = v
		}
	}
	return m
}

// lay lays doc, a --config document, over d: a key doc leaves out keeps d's
// setting. An unknown key, a value of the wrong type and what Validate finds
// against b is an error naming the key and its line.
func (d Dependencies) lay(doc *yaml.Node, b Bounds) (Dependencies, error) {
	names := map[string]any{}
	for name := range d {
		names[name] = true // each section's keys are apply's to check
	}
	if err := knownKeys(doc, "", map[string]any{"dependencies": names}); err != nil {
		return nil, err
	}
	var file struct{ Dependencies map[string]yaml.Node }
	if err := doc.Decode(&file); err != nil {
		return nil, oneLine(err)
	}
	out := maps.Clone(d)
	for _, name := range d.Names() {
		if n, ok := file.Dependencies[name]; ok {
			dep := out[name]
			if err := dep.apply(&n, "dependencies."+name); err != nil {
				return nil, err
			}
			out[name] = dep
		}
	}
	if err := out.Validate(b); err != nil {
		key, msg, _ := strings.Cut(err.Error(), ": ")
		if line, _ := lookup(doc, key); line > 0 {
			return nil, fmt.Errorf("%s (line %d): %s", key, line, msg)
		}
		return nil, err
	}
	return out, nil
}

// mapping is the YAML mapping {key: value}.
func mapping(key string, value *yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: key}, value}}
}

// apply lays the settings in n, a mapping keyed like a --config section,
// over d; key names the section in errors. A timeout of "auto" (any case)
// turns AutoTimeout on and keeps Timeout, where the adaptive sub-budget
// starts; a duration turns it off.
func (d *Dependency) apply(n *yaml.Node, key string) error {
	if err := knownKeys(n, key+".", d.Settings()); err != nil {
		return err
	}
	auto := d.AutoTimeout
	if _, t := lookup(n, "timeout"); t != nil && t.Kind == yaml.ScalarNode && t.ShortTag() != "!!null" {
		if auto = strings.EqualFold(t.Value, "auto"); auto {
			*t = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"} // decodes as "leave Timeout alone"
		}
	}
	if err := n.Decode(d); err != nil {
		return fmt.Errorf("%s: %w", key, oneLine(err))
	}
	d.AutoTimeout = auto
	return nil
}

// parse reads a YAML (or JSON) document into its root node; an empty one is
// an empty mapping whose Line is 0.
func parse(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, oneLine(err)
	}
	if len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.MappingNode}, nil
	}
	return doc.Content[0], nil
}

// knownKeys refuses, naming it and its line, a key of the mapping n that the
// tree known (as Settings) does not hold; the decoder refuses wrong shapes.
func knownKeys(n *yaml.Node, prefix string, known map[string]any) error {
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if _, ok := known[k.Value]; !ok {
			return fmt.Errorf("%s%s (line %d): unknown key (known: %s)", prefix, k.Value, k.Line, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
		if sub, ok := known[k.Value].(map[string]any); ok {
			if err := knownKeys(n.Content[i+1], prefix+k.Value+".", sub); err != nil {
				return err
			}
		}
	}
	return nil
}

// lookup finds the dotted key under the mapping n: its line and its value;
// 0 and nil when it is not there.
func lookup(n *yaml.Node, key string) (line int, v *yaml.Node) {
	for _, k := range strings.Split(key, ".") {
		i := 0
		for n.Kind == yaml.MappingNode && i+1 < len(n.Content) && n.Content[i].Value != k {
			i += 2
		}
		if n.Kind != yaml.MappingNode || i+1 >= len(n.Content) {
			return 0, nil
		}
		line, n = n.Content[i].Line, n.Content[i+1]
	}
	return line, n
}

// oneLine is err with yaml's multi-line lists of problems joined on one line.
func oneLine(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New(strings.Join(te.Errors, "; "))
	}
	if err != nil {
		return errors.New(strings.Join(strings.Fields(err.Error()), " "))
	}
	return nil
}
