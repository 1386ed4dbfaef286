package config

import (
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

// ErrUnknownDependency is Dependencies.Patch's error for a name that is not
// one of Names(); the admin API answers it with 404.
var ErrUnknownDependency = errors.New("unknown dependency")

// Dependencies holds the settings of every registered downstream, by name,
// and of the last-good store's own guard, NameCache. It is a value: Set and
// Update copy before changing, so copies are independent. The zero value
// holds nothing; start from DefaultDependencies.
type Dependencies struct {
	m map[string]Dependency
}

// Names returns the dependency names in their fixed order: the registered
// downstreams in page order, then cache.
func (Dependencies) Names() []string { return append(downstream.Names(), NameCache) }

// Get returns the named dependency's settings, and false for an unknown name.
func (d Dependencies) Get(name string) (Dependency, bool) {
	dep, ok := d.m[name]
	return dep, ok
}

// Set replaces the named dependency's settings; it reports false, changing
// nothing, for a name that is not in Names.
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

// Update changes the named dependency's settings with f, as Set does:
//
//	deps.Update("coupon", func(d *config.Dependency) { d.Timeout = 200 * time.Millisecond })
func (d *Dependencies) Update(name string, f func(*Dependency)) bool {
	dep, ok := d.Get(name)
	if !ok {
		return false
	}
	f(&dep)
	return d.Set(name, dep)
}

// DefaultDependencies is DefaultDependenciesFor(DefaultMaxInflight).
func DefaultDependencies() Dependencies { return DefaultDependenciesFor(DefaultMaxInflight) }

// DefaultDependenciesFor returns the built-in settings, every field filled
// in by resilience.Config.WithDefaults: each registry entry's Defaults (the
// entry says why each number) and the cache's below. A bulkhead the entry
// leaves unset is MinBulkhead, so a page degrades because a dependency is
// sick or slow, never because orderagg refused itself a call.
func DefaultDependenciesFor(maxInflight int) Dependencies {
	var d Dependencies
	explicit := map[string]bool{}
	for _, e := range downstream.Registered() {
		d.Set(e.Name, Dependency{Config: e.Defaults.WithDefaults(), CacheMaxAge: e.CacheMaxAge})
		explicit[e.Name] = e.Defaults.Bulkhead.MaxConcurrent != 0
	}
	d.Set(NameCache, Dependency{Config: CacheDefaults.WithDefaults()})
	for _, name := range d.Names() {
		if !explicit[name] {
			d.Update(name, func(dep *Dependency) { dep.Bulkhead.MaxConcurrent = d.MinBulkhead(name, maxInflight) })
		}
	}
	return d
}

// CacheDefaults are the last-good reads' own settings (zero fields take
// resilience's defaults). The reads run inside --reserve, after a downstream
// failed: a Redis nearby answers in about a millisecond, so 50ms is generous
// and two reads fit the 100ms reserve; a retry would eat the reserve, and the
// semantic default is next anyway.
var CacheDefaults = resilience.Config{
	Timeout: 50 * time.Millisecond,
	Retry:   resilience.RetryConfig{MaxAttempts: 1},
}

// SlotsPerPage is how many of the named dependency's bulkhead slots one page
// can hold at once: one per downstream call (retries run inside it), two
// with hedging, and one cache slot per section; 0 for an unknown name.
func (d Dependencies) SlotsPerPage(name string) int {
	dep, ok := d.Get(name)
	switch {
	case name == NameCache:
		return len(downstream.Names())
	case !ok:
		return 0
	case dep.Hedge.Enabled:
		return 2
	}
	return 1
}

// MinBulkhead is the smallest bulkhead.max_concurrent that never refuses a
// call while maxInflight pages are admitted: maxInflight × SlotsPerPage (by
// Little's law, when the dependency is slow but in budget every admitted
// page holds its slots at once).
func (d Dependencies) MinBulkhead(name string, maxInflight int) int {
	return maxInflight * d.SlotsPerPage(name)
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
			out = append(out, Undersized{Dependency: name, Have: dep.Bulkhead.MaxConcurrent, Need: need, MaxInflight: maxInflight})
		}
	}
	return out
}

// Bounds are the page's time limits (--deadline and --reserve) that every
// dependency's settings must fit; see Dependencies.Validate.
type Bounds struct {
	Deadline, Reserve time.Duration
}

// CallsEnd is when, after a page starts, its calls are cut: Deadline − Reserve.
func (b Bounds) CallsEnd() time.Duration { return b.Deadline - b.Reserve }

// Validate reports every invalid setting, each a *KeyError naming its key
// ("dependencies.coupon.breaker.window"), all on one line. Beside each
// guard's own rules (resilience.Config.Validate) it refuses what would
// blind a breaker:
//   - a timeout, or timeout_max, at or past b.CallsEnd(): a call cut there
//     ends as the page's DEADLINE, which no breaker counts;
//   - a reserve not longer than cache.timeout, the bound of a last-good read
//     made within it;
//   - a fallback_timeout not longer than cache.timeout, which would cut a
//     slow read before the cache's own guard times it out.
//
// Run it on every new set of settings before putting it in force: start-up,
// SIGHUP reload and admin PATCH.
func (d Dependencies) Validate(b Bounds) error {
	var errs errList
	bad := func(key string, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: fmt.Errorf(format, args...)})
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
		for _, err := range unjoin(dep.Config.Validate()) {
			k, msg, _ := strings.Cut(err.Error(), ": ")
			bad(key+"."+k, "%s", msg)
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
	slices.SortStableFunc(errs, func(a, b error) int { return strings.Compare(a.(*KeyError).Key, b.(*KeyError).Key) })
	return errs.orNil()
}

// Patch returns a copy of d with the named dependency's settings patched by
// body, a JSON (or YAML) object with any of the keys of its section of the
// --config file, and the whole validated against b. d is never modified. An
// unknown name matches ErrUnknownDependency; every other error is about the
// body and names the key at fault.
func (d Dependencies) Patch(name string, body []byte, b Bounds) (Dependencies, error) {
	cur, ok := d.Get(name)
	if !ok {
		return Dependencies{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownDependency, name, strings.Join(d.Names(), ", "))
	}
	next, err := decodeSection(body, cur)
	if err != nil {
		return Dependencies{}, &KeyError{Key: "dependencies." + name, Err: err}
	}
	out := d
	out.Set(name, next)
	if err := out.Validate(b); err != nil {
		return Dependencies{}, err
	}
	return out, nil
}

// Settings returns d as a tree of maps keyed like the --config file, with
// durations written in their largest whole unit ("300ms", "24h"), as the
// admin API shows and accepts them.
func (d Dependency) Settings() map[string]any {
	raw, err := yaml.Marshal(d)
	var out map[string]any
	if err == nil {
		err = yaml.Unmarshal(raw, &out)
	}
	if err != nil {
		panic(err) // a struct of numbers always round-trips
	}
	var tidy func(m map[string]any)
	tidy = func(m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				tidy(sub)
			} else if s, ok := v.(string); ok {
				if d, err := time.ParseDuration(s); err == nil {
					m[k] = wholeUnit(d)
				}
			}
		}
	}
	tidy(out)
	if d.AutoTimeout {
		out["timeout"] = "auto"
	}
	return out
}

// wholeUnit writes d in its largest whole unit: "1500ms", "24h", "0s".
func wholeUnit(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if d%u.d == 0 && d != 0 {
			return fmt.Sprintf("%d%s", d/u.d, u.unit)
		}
	}
	if d%time.Millisecond != 0 || d == 0 {
		return d.String()
	}
	return fmt.Sprint(d.Milliseconds(), "ms")
}

// Change is one setting that differs, by key ("breaker.sleep_window").
type Change struct {
	Key      string
	From, To any
}

// Changes lists the settings that differ between before and after, sorted
// by key: what a reload or a PATCH logs.
func Changes(before, after Dependency) []Change {
	var out []Change
	var walk func(prefix string, b, a map[string]any)
	walk = func(prefix string, b, a map[string]any) {
		for _, k := range slices.Sorted(maps.Keys(b)) {
			if sub, ok := b[k].(map[string]any); ok {
				walk(prefix+k+".", sub, a[k].(map[string]any))
			} else if fmt.Sprint(b[k]) != fmt.Sprint(a[k]) {
				out = append(out, Change{Key: prefix + k, From: b[k], To: a[k]})
			}
		}
	}
	walk("", before.Settings(), after.Settings())
	return out
}
