package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
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
// admin API's PATCH body.
type Dependency struct {
	resilience.Config `yaml:",inline"`
	// CacheMaxAge is the age beyond which a last-good answer is treated as
	// missing. Positive for every downstream; not allowed for "cache".
	CacheMaxAge time.Duration `yaml:"cache_max_age" json:"cache_max_age"`
}

// NameCache names the guard of the last-good reads made when a downstream
// fails. The downstreams' names come from internal/downstream's registry.
const NameCache = "cache"

// ErrUnknownDependency is Patch's error for a name not in Names.
var ErrUnknownDependency = errors.New("unknown dependency")

// Dependencies holds the settings of every registered downstream, by name,
// and of the last-good store's guard, NameCache. It is a value: Set and
// Update copy before changing. The zero value holds nothing; start from
// DefaultDependencies.
type Dependencies struct{ m map[string]Dependency }

// Names returns the dependency names in their fixed order: the registered
// downstreams in page order, then cache.
func (Dependencies) Names() []string { return append(downstream.Names(), NameCache) }

// Get returns the named dependency's settings, and false for an unknown name.
func (d Dependencies) Get(name string) (Dependency, bool) {
	dep, ok := d.m[name]
	return dep, ok
}

// Set replaces the named dependency's settings; it reports false, changing
// nothing, for a name not in Names.
func (d *Dependencies) Set(name string, dep Dependency) bool {
	if !slices.Contains(d.Names(), name) {
		return false
	}
	d.m = maps.Clone(d.m)
	if d.m == nil {
		d.m = map[string]Dependency{}
	}
	d.m[name] = dep
	return true
}

// Update changes the named dependency's settings with f, as Set does.
func (d *Dependencies) Update(name string, f func(*Dependency)) bool {
	dep, ok := d.Get(name)
	if ok {
		f(&dep)
	}
	return ok && d.Set(name, dep)
}

// DefaultDependencies is DefaultDependenciesFor(DefaultMaxInflight).
func DefaultDependencies() Dependencies { return DefaultDependenciesFor(DefaultMaxInflight) }

// DefaultDependenciesFor returns the built-in settings with every field
// filled in: each registry entry's Defaults (the entry says why each number)
// and CacheDefaults. A bulkhead left unset is MinBulkhead, so a page
// degrades because a dependency is sick or slow, never because orderagg
// refused itself a call.
func DefaultDependenciesFor(maxInflight int) Dependencies {
	var d Dependencies
	d.Set(NameCache, Dependency{Config: CacheDefaults})
	for _, e := range downstream.Registered() {
		d.Set(e.Name, Dependency{Config: e.Defaults, CacheMaxAge: e.CacheMaxAge})
	}
	for _, name := range d.Names() {
		d.Update(name, func(dep *Dependency) {
			if dep.Bulkhead.MaxConcurrent == 0 {
				dep.Bulkhead.MaxConcurrent = d.MinBulkhead(name, maxInflight)
			}
			dep.Config = dep.Config.WithDefaults()
		})
	}
	return d
}

// CacheDefaults are the last-good reads' own settings (zero fields take
// resilience's defaults). The reads run inside --reserve after a downstream
// failed: two 50ms reads fit the 100ms reserve, and a retry would eat it.
var CacheDefaults = resilience.Config{
	Timeout: 50 * time.Millisecond,
	Retry:   resilience.RetryConfig{MaxAttempts: 1},
}

// MinBulkhead is the smallest bulkhead.max_concurrent of the named
// dependency that never refuses a call while maxInflight pages are admitted:
// maxInflight × the slots one page holds at once (one per downstream call,
// retries included, two with hedging; one cache slot per section); 0 for an
// unknown name. By Little's law, when the dependency is slow but in budget
// every admitted page holds its slots.
func (d Dependencies) MinBulkhead(name string, maxInflight int) int {
	dep, ok := d.Get(name)
	switch {
	case name == NameCache:
		return maxInflight * len(downstream.Names())
	case !ok:
		return 0
	case dep.Hedge.Enabled:
		return 2 * maxInflight
	}
	return maxInflight
}

// Undersized is a bulkhead smaller than MinBulkhead: under load the
// dependency's calls are REJECTED while admission still lets pages in.
type Undersized struct {
	Dependency  string
	Have, Need  int
	MaxInflight int
}

// Key is the setting at fault, as the --config file names it.
func (u Undersized) Key() string { return "dependencies." + u.Dependency + ".bulkhead.max_concurrent" }

// Undersized lists, in Names order, the bulkheads smaller than MinBulkhead:
// a warning, not an error, since capping a fragile dependency is a choice.
func (d Dependencies) Undersized(maxInflight int) []Undersized {
	var out []Undersized
	for _, name := range d.Names() {
		dep, ok := d.Get(name)
		if need := d.MinBulkhead(name, maxInflight); ok && dep.Bulkhead.MaxConcurrent < need {
			out = append(out, Undersized{name, dep.Bulkhead.MaxConcurrent, need, maxInflight})
		}
	}
	return out
}

// Bounds are the page's time limits (--deadline, --reserve) that every
// dependency's settings must fit; see Validate.
type Bounds struct{ Deadline, Reserve time.Duration }

// CallsEnd is when, after a page starts, its calls are cut: Deadline − Reserve.
func (b Bounds) CallsEnd() time.Duration { return b.Deadline - b.Reserve }

// Validate reports every invalid setting on one line, sorted by key, each
// naming its key ("dependencies.coupon.breaker.window: …"). Beside each
// guard's own rules (resilience.Config.Validate) it refuses what would
// blind a breaker: a timeout or timeout_max at or past b.CallsEnd() (the
// call would end as the page's DEADLINE, which no breaker counts), and a
// reserve or fallback_timeout not longer than cache.timeout (a last-good
// read would be cut before its own guard times it out). Start-up, SIGHUP
// reload and admin PATCH run it before putting settings in force.
func (d Dependencies) Validate(b Bounds) error { return d.problems(b).orNil() }

func (d Dependencies) problems(b Bounds) problems {
	var ps problems
	bad := func(key string, format string, args ...any) {
		ps = append(ps, problem{key: key, msg: fmt.Sprintf(format, args...)})
	}
	reserve := "--reserve (" + EnvName(EnvPrefix, "reserve") + ")"
	if b.Reserve >= b.Deadline {
		bad(reserve, "%v must be shorter than --deadline %v", b.Reserve, b.Deadline)
	}
	cache, _ := d.Get(NameCache)
	if b.Reserve <= cache.Timeout {
		bad(reserve, "%v must be longer than dependencies.cache.timeout %v, the bound of a last-good read made within it", b.Reserve, cache.Timeout)
	}
	for _, name := range d.Names() {
		key := "dependencies." + name
		dep, ok := d.Get(name)
		if !ok {
			bad(key, "missing (start from DefaultDependencies)")
			continue
		}
		if err := dep.Config.Validate(); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") { // errors.Join's "key: message" lines
				k, msg, _ := strings.Cut(line, ": ")
				bad(key+"."+k, "%s", msg)
			}
		}
		for k, v := range map[string]time.Duration{"timeout": dep.Timeout, "timeout_max": dep.TimeoutMax} {
			if v >= b.CallsEnd() {
				bad(key+"."+k, "%v must be shorter than --deadline %v minus --reserve %v = %v, or a hang is cut as the page's DEADLINE, which the breaker never sees",
					v, b.Deadline, b.Reserve, b.CallsEnd())
			}
		}
		switch {
		case name == NameCache && dep.CacheMaxAge != 0:
			bad(key+".cache_max_age", "does not apply to the cache itself; leave it out")
		case name != NameCache && dep.CacheMaxAge <= 0:
			bad(key+".cache_max_age", "must be positive, got %v", dep.CacheMaxAge)
		case name != NameCache && dep.FallbackTimeout <= cache.Timeout:
			bad(key+".fallback_timeout", "%v must be longer than dependencies.cache.timeout %v", dep.FallbackTimeout, cache.Timeout)
		}
	}
	slices.SortStableFunc(ps, func(a, b problem) int { return strings.Compare(a.key, b.key) })
	return ps
}

// Patch returns a copy of d with the named dependency's settings patched by
// body, a JSON (or YAML) object with any keys of its --config section, the
// whole validated against b; d is never modified. An unknown name matches
// ErrUnknownDependency; every other error names the key at fault.
func (d Dependencies) Patch(name string, body []byte, b Bounds) (Dependencies, error) {
	next, ok := d.Get(name)
	if !ok {
		return Dependencies{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownDependency, name, strings.Join(d.Names(), ", "))
	}
	if json.Valid(body) { // JSON is YAML, but for tabs: compact it first
		var buf bytes.Buffer
		_ = json.Compact(&buf, body)
		body = buf.Bytes()
	}
	dec := yaml.NewDecoder(bytes.NewReader(body))
	dec.KnownFields(true)
	var te *yaml.TypeError
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return Dependencies{}, fmt.Errorf(`dependencies.%s: empty body: send an object of settings such as {"timeout":"300ms"}`, name)
	case errors.As(err, &te):
		return Dependencies{}, fmt.Errorf("dependencies.%s: %s", name, strings.Join(te.Errors, "; "))
	case err != nil:
		return Dependencies{}, fmt.Errorf("dependencies.%s: %s", name, strings.Join(strings.Fields(err.Error()), " "))
	}
	out := d
	out.Set(name, next)
	return out, out.Validate(b)
}

// Settings returns d as a tree of maps keyed like the --config file, with
// durations in their short form ("300ms", "10m", "24h"): what the admin API
// shows, and a PATCH body that gives the same settings back.
func (d Dependency) Settings() map[string]any {
	var n yaml.Node
	var out map[string]any
	if err := errors.Join(n.Encode(d), shorten(&n), n.Decode(&out)); err != nil {
		panic(err) // a struct of numbers always round-trips
	}
	if d.AutoTimeout {
		out["timeout"] = "auto"
	}
	return out
}

// shorten writes the durations under n as people write them: "10m", not "10m0s".
func shorten(n *yaml.Node) error {
	if d, err := time.ParseDuration(n.Value); err == nil && n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		if n.Value = d.String(); strings.HasSuffix(n.Value, "m0s") {
			n.Value = strings.TrimSuffix(n.Value, "0s")
		}
		if strings.HasSuffix(n.Value, "h0m") {
			n.Value = strings.TrimSuffix(n.Value, "0m")
		}
	}
	for _, c := range n.Content {
		shorten(c)
	}
	return nil
}

// Change is one setting that differs, by key ("breaker.sleep_window").
type Change struct {
	Key      string
	From, To any
}

// Changes lists, sorted by key, the settings that differ between before and
// after: what a reload or a PATCH logs.
func Changes(before, after Dependency) []Change {
	b, a := flatten("", before.Settings()), flatten("", after.Settings())
	var out []Change
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if fmt.Sprint(b[k]) != fmt.Sprint(a[k]) {
			out = append(out, Change{k, b[k], a[k]})
		}
	}
	return out
}

func flatten(prefix string, m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			maps.Copy(out, flatten(prefix+k+".", sub))
		} else {
			out[prefix+k] = v
		}
	}
	return out
}

// LoadFile reads the YAML file at path (one top-level key, dependencies,
// then one section per name of Names) and lays it over base, normally
// DefaultDependencies, so a key removed from the file returns to its default
// on reload. It decodes strictly: an unknown key, a value of the wrong type
// and every problem Validate finds against b is an error naming the key and
// its line.
func LoadFile(path string, base Dependencies, b Bounds) (Dependencies, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Dependencies{}, fmt.Errorf("config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Dependencies{}, fmt.Errorf("config file %s: %s", path, strings.Join(strings.Fields(err.Error()), " "))
	}
	keys, lines := keyLines(&doc)
	var ps problems
	var strict struct {
		Dependencies map[string]Dependency `yaml:"dependencies"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&strict); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return Dependencies{}, fmt.Errorf("config file %s: %v", path, err)
		}
		for _, msg := range te.Errors { // "line 4: field windw not found in type config.section"
			var line int
			fmt.Sscanf(msg, "line %d:", &line)
			ps = append(ps, problem{cmp.Or(keys[line], "(top level)"), line, strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", line))})
		}
	}
	// The strict decode starts each section from zero; lay them over base.
	deps, sections := base, find(&doc, "dependencies")
	for i := 0; len(ps) == 0 && sections != nil && i+1 < len(sections.Content); i += 2 {
		k, v := sections.Content[i], sections.Content[i+1]
		if dep, ok := base.Get(k.Value); !ok {
			ps = append(ps, problem{"dependencies." + k.Value, k.Line, "unknown dependency (known: " + strings.Join(base.Names(), ", ") + ")"})
		} else {
			_ = v.Decode(&dep) // the strict decode above found it sound
			deps.Set(k.Value, dep)
		}
	}
	if len(ps) == 0 {
		ps = deps.problems(b)
		for i := range ps {
			ps[i].line = lines[ps[i].key]
		}
	}
	if len(ps) > 0 {
		return Dependencies{}, fmt.Errorf("config file %s: %w", path, ps)
	}
	return deps, nil
}

// section is Dependency without its UnmarshalYAML.
type section Dependency

// UnmarshalYAML lays a section of settings over d, strictly when the
// decoder is (yaml's callback form keeps the decoder's options). A
// "timeout" of "auto" sets AutoTimeout and keeps Timeout, where the adaptive
// sub-budget starts; a duration turns AutoTimeout off.
func (d *Dependency) UnmarshalYAML(unmarshal func(any) error) error {
	var probe struct {
		Timeout yaml.Node      `yaml:"timeout"`
		Rest    map[string]any `yaml:",inline"`
	}
	_ = unmarshal(&probe) // the decode below reports what is wrong
	err := unmarshal((*section)(d))
	if t := probe.Timeout; t.Kind == yaml.ScalarNode && t.ShortTag() != "!!null" {
		d.AutoTimeout = strings.EqualFold(t.Value, "auto")
		var te *yaml.TypeError
		if errors.As(err, &te) && d.AutoTimeout { // "auto" is no time.Duration: drop that complaint
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

// keyLines maps the dotted path of every key under doc to its line, and
// each line to the first key on it.
func keyLines(doc *yaml.Node) (keys map[int]string, lines map[string]int) {
	keys, lines = map[int]string{}, map[string]int{}
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		for i, c := range n.Content {
			if n.Kind != yaml.MappingNode {
				walk(prefix, c)
			} else if i%2 == 1 {
				k := n.Content[i-1]
				lines[prefix+k.Value] = k.Line
				keys[k.Line] = cmp.Or(keys[k.Line], prefix+k.Value)
				walk(prefix+k.Value+".", c)
			}
		}
	}
	walk("", doc)
	return keys, lines
}

// find returns the value of key in the mapping doc, or nil.
func find(doc *yaml.Node, key string) *yaml.Node {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	for i := 0; doc.Kind == yaml.MappingNode && i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == key {
			return doc.Content[i+1]
		}
	}
	return nil
}

// problem is one invalid setting: its key ("dependencies.coupon.timeout",
// or a flag such as "--reserve"), its line in a file (0: none) and what is
// wrong with it.
type problem struct {
	key  string
	line int
	msg  string
}

// problems is an error of several problems on one line.
type problems []problem

func (ps problems) Error() string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		if parts[i] = p.key + ": " + p.msg; p.line > 0 {
			parts[i] = fmt.Sprintf("%s (line %d): %s", p.key, p.line, p.msg)
		}
	}
	return strings.Join(parts, "; ")
}

func (ps problems) orNil() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}
