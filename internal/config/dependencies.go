package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Dependency is one dependency's settings: its resilience guard and, for the
// four downstreams, how old a last-good answer may be and still be served.
// The yaml names are the keys of the dependency's section of the --config
// file and of the admin API's PATCH body.
type Dependency struct {
	resilience.Config `yaml:",inline"`

	// CacheMaxAge is how old a last-good answer may be when it is served in
	// place of a failed live call; older entries are treated as missing and
	// the section falls back to its semantic default. It must be positive for
	// every downstream and is not allowed for "cache" (the last-good store
	// itself has no last-good answer).
	CacheMaxAge time.Duration `yaml:"cache_max_age" json:"cache_max_age"`
}

// Dependencies holds the settings of every dependency: each downstream of
// internal/downstream's registry, by its name, and the last-good store's own guard,
// "cache". The name is the key used in the --config file, the admin API and
// /v1/resilience.
//
// A Dependencies is a value: copies are independent, because Set and Update
// copy the settings before changing them. The zero value holds nothing;
// start from DefaultDependencies.
type Dependencies struct {
	m map[string]Dependency
}

// NameCache names the guard of the last-good reads made when a downstream
// fails. The downstreams' names come from internal/downstream's registry.
const NameCache = "cache"

// Names returns the dependency names in their fixed order: the registered
// downstreams in page order, then cache. The slice is the caller's to keep.
func (Dependencies) Names() []string {
	return append(downstream.Names(), NameCache)
}

// Get returns the named dependency's settings, and false for an unknown
// name.
func (d Dependencies) Get(name string) (Dependency, bool) {
	dep, ok := d.m[name]
	return dep, ok
}

// Set replaces the named dependency's settings; it reports false, changing
// nothing, for a name that is not in Names. Other copies of d are not
// affected.
func (d *Dependencies) Set(name string, dep Dependency) bool {
	if !slices.Contains(d.Names(), name) {
		return false
	}
	next := make(map[string]Dependency, len(d.m)+1)
	maps.Copy(next, d.m)
	next[name] = dep
	d.m = next
	return true
}

// Update changes the named dependency's settings with f, as Set does. It is
// the short way to adjust one setting:
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

// DefaultDependencies returns the built-in settings for the default
// --max-inflight: DefaultDependenciesFor(DefaultMaxInflight).
// config.example.yaml at the repository root is generated from them
// (ExampleFile), and a test keeps the two equal.
func DefaultDependencies() Dependencies { return DefaultDependenciesFor(DefaultMaxInflight) }

// DefaultDependenciesFor returns the built-in settings when admission lets
// maxInflight pages in at once, every field filled in
// (resilience.Config.WithDefaults supplies what is not set): each registered
// downstream's defaults (the registry says why each number), and the
// cache's below. A bulkhead the registry leaves unset is sized by
// MinBulkhead, so none is smaller than the load admission lets in: a page
// degrades because a dependency is sick or slow, never because orderagg
// refused itself a call (see docs/design.md, "Sizing").
func DefaultDependenciesFor(maxInflight int) Dependencies {
	var d Dependencies
	for _, ds := range downstream.Registered() {
		d.Set(ds.Name, dependency(ds.Defaults, ds.CacheMaxAge))
	}
	// The last-good reads run inside the reserve, after a downstream has
	// already failed: a Redis nearby answers in about a millisecond, so
	// 50ms is generous; a retry would eat the reserve and the semantic
	// default is next anyway; and the breaker needs 20 calls before judging
	// Redis, like the others. Its bulkhead is sized like the others'.
	d.Set(NameCache, dependency(resilience.Config{
		Timeout: 50 * time.Millisecond,
		Retry:   resilience.RetryConfig{MaxAttempts: 1},
		Breaker: resilience.BreakerConfig{MinRequests: 20},
	}, 0))
	explicit := map[string]bool{}
	for _, ds := range downstream.Registered() {
		explicit[ds.Name] = ds.Defaults.Bulkhead.MaxConcurrent != 0
	}
	for _, name := range d.Names() {
		if explicit[name] {
			continue // the registry entry chose its own; Undersized says if it is too small
		}
		need := d.MinBulkhead(name, maxInflight)
		d.Update(name, func(dep *Dependency) { dep.Bulkhead.MaxConcurrent = need })
	}
	return d
}

// SlotsPerPage is how many of the named dependency's bulkhead slots one page
// can hold at once. A page calls each downstream once and waits for every
// call before it leaves admission; retries run one after another inside
// that call's slot, and a hedge takes a second slot beside it. Every
// section may read its last-good answer at the same moment, so a page can
// hold one cache slot per downstream. 0 for an unknown name.
func (d Dependencies) SlotsPerPage(name string) int {
	if name == NameCache {
		return len(downstream.Names())
	}
	dep, ok := d.Get(name)
	switch {
	case !ok:
		return 0
	case dep.Hedge.Enabled:
		return 2
	}
	return 1
}

// MinBulkhead is the smallest bulkhead.max_concurrent of the named dependency
// that never refuses a call while at most maxInflight pages are admitted:
// maxInflight × SlotsPerPage. By Little's law the calls in flight to a
// dependency are the page rate times each call's time, and a call never
// outlasts its page; when the dependency is slow but inside its sub-budget
// the two times meet, and every admitted page holds its slots at once.
func (d Dependencies) MinBulkhead(name string, maxInflight int) int {
	return maxInflight * d.SlotsPerPage(name)
}

// Undersized is a bulkhead smaller than MinBulkhead: under load a healthy
// dependency's calls are REJECTED, and pages degrade, while admission still
// lets pages in.
type Undersized struct {
	Dependency  string
	Have, Need  int
	MaxInflight int
}

// Key is the setting at fault, as the --config file names it.
func (u Undersized) Key() string {
	return "dependencies." + u.Dependency + ".bulkhead.max_concurrent"
}

func (u Undersized) String() string {
	return fmt.Sprintf("%s %d is below %d, what --max-inflight %d admits (%d slots a page): its calls will be REJECTED and pages degraded before admission sheds load",
		u.Key(), u.Have, u.Need, u.MaxInflight, u.Need/max(u.MaxInflight, 1))
}

// Undersized lists, in Names order, the bulkheads smaller than MinBulkhead
// for maxInflight. It is a warning, not an error: capping calls to a
// fragile dependency below the page limit is a choice an operator may make
// (pages then degrade with REJECTED under load), but it must be a visible
// one. The built-in settings never appear here.
func (d Dependencies) Undersized(maxInflight int) []Undersized {
	var out []Undersized
	for _, name := range d.Names() {
		dep, ok := d.Get(name)
		if !ok {
			continue
		}
		if need := d.MinBulkhead(name, maxInflight); dep.Bulkhead.MaxConcurrent < need {
			out = append(out, Undersized{Dependency: name, Have: dep.Bulkhead.MaxConcurrent, Need: need, MaxInflight: maxInflight})
		}
	}
	return out
}

func dependency(c resilience.Config, maxAge time.Duration) Dependency {
	return Dependency{Config: c.WithDefaults(), CacheMaxAge: maxAge}
}

// Validate reports every invalid setting of d, naming each by its key
// ("breaker.window: …"). Like resilience.Config.Validate it checks values
// after defaults. The rules that depend on which dependency d is, or on the
// request deadline, are Dependencies.Validate's.
func (d Dependency) Validate() error {
	errs := []error{d.Config.Validate()}
	if d.CacheMaxAge < 0 {
		errs = append(errs, &keyError{key: "cache_max_age", err: fmt.Errorf("must not be negative, got %s", formatDuration(d.CacheMaxAge))})
	}
	return join(errs)
}

// Validate reports every invalid setting of every dependency, each named by
// its full key ("dependencies.coupon.breaker.window: …"), on one line. A
// dependency's timeout must be shorter than deadline, the whole request's
// budget: a longer sub-budget could never be used and hides a mistake. Use it
// on any new set of settings before putting it in force (start-up, SIGHUP
// reload, admin PATCH).
func (d Dependencies) Validate(deadline time.Duration) error {
	errs := []error{d.check()}
	cache, _ := d.Get(NameCache)
	for _, name := range d.Names() {
		dep, _ := d.Get(name)
		if dep.Timeout >= deadline {
			errs = append(errs, &keyError{
				key: "dependencies." + name + ".timeout",
				err: fmt.Errorf("%s must be shorter than --deadline (%s) %s", formatDuration(dep.Timeout), envName("deadline"), formatDuration(deadline)),
			})
		}
		// The ceiling of timeout: auto, checked whatever the mode so that a
		// later switch to auto cannot reveal an old mistake.
		if dep.TimeoutMax >= deadline {
			errs = append(errs, &keyError{
				key: "dependencies." + name + ".timeout_max",
				err: fmt.Errorf("%s must be shorter than --deadline (%s) %s", formatDuration(dep.TimeoutMax), envName("deadline"), formatDuration(deadline)),
			})
		}
		// A last-good read runs inside the fallback's bound. If that bound
		// were not longer than the cache's own sub-budget, a slow store would
		// be cut short by the fallback — counted as the caller's deadline,
		// which never opens the cache's breaker — instead of timing out in
		// its own guard, where it counts.
		if name != NameCache && dep.FallbackTimeout <= cache.Timeout {
			errs = append(errs, &keyError{
				key: "dependencies." + name + ".fallback_timeout",
				err: fmt.Errorf("%s must be longer than dependencies.cache.timeout %s", formatDuration(dep.FallbackTimeout), formatDuration(cache.Timeout)),
			})
		}
	}
	return join(errs)
}

// check is Validate without the deadline rule: everything a settings file or
// a PATCH body can get wrong on its own.
func (d Dependencies) check() error {
	var errs []error
	for _, name := range d.Names() {
		dep, ok := d.Get(name)
		if !ok {
			errs = append(errs, &keyError{key: "dependencies." + name, err: errors.New("missing (start from DefaultDependencies)")})
			continue
		}
		if err := dep.Validate(); err != nil {
			errs = append(errs, under("dependencies."+name, err))
		}
		switch {
		case name == NameCache && dep.CacheMaxAge != 0:
			errs = append(errs, &keyError{key: "dependencies.cache.cache_max_age", err: errors.New("does not apply to the cache itself; leave it out")})
		case name != NameCache && dep.CacheMaxAge == 0:
			errs = append(errs, &keyError{key: "dependencies." + name + ".cache_max_age", err: errors.New("must be positive")})
		}
	}
	return join(errs)
}

// Patch returns a copy of d with the named dependency's settings patched by
// body (see PatchDependency) and the whole set validated against deadline.
// d is never modified: on any error nothing has changed. An unknown name
// matches ErrUnknownDependency; every other error is about the body and names
// the key at fault ("dependencies.coupon.timeout: …").
func (d Dependencies) Patch(name string, body []byte, deadline time.Duration) (Dependencies, error) {
	cur, ok := d.Get(name)
	if !ok {
		return Dependencies{}, fmt.Errorf("%w %q (known: %v)", ErrUnknownDependency, name, d.Names())
	}
	next, err := PatchDependency(cur, body)
	if err != nil {
		return Dependencies{}, under("dependencies."+name, err)
	}
	out := d
	out.Set(name, next)
	if err := out.Validate(deadline); err != nil {
		return Dependencies{}, err
	}
	return out, nil
}

// Settings returns d as a tree of maps keyed like the --config file, with
// durations written as in the file ("300ms", "24h"), so the admin API can
// show the settings in force in the same form it accepts in a PATCH body.
func (d Dependency) Settings() map[string]any {
	var n yaml.Node
	if err := n.Encode(d); err != nil {
		panic(err) // a struct of numbers always encodes
	}
	out := settingsOf(&n)
	if d.AutoTimeout {
		out["timeout"] = "auto" // the Duration is only where it started
	}
	return out
}

func settingsOf(n *yaml.Node) map[string]any {
	out := make(map[string]any, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		switch {
		case v.Kind == yaml.MappingNode:
			out[k] = settingsOf(v)
		case v.ShortTag() == "!!str":
			out[k] = show(v)
		default:
			var x any
			_ = v.Decode(&x) // a scalar yaml itself wrote
			out[k] = x
		}
	}
	return out
}

// Changes lists the settings that differ between before and after, by key
// ("breaker.sleep_window"), sorted by key, each with both values as
// the file writes them: what a reload or a PATCH log line shows.
func Changes(before, after Dependency) []Change {
	var out []Change
	var walk func(prefix string, b, a map[string]any, keys []string)
	walk = func(prefix string, b, a map[string]any, keys []string) {
		for _, k := range keys {
			if sub, ok := b[k].(map[string]any); ok {
				walk(prefix+k+".", sub, a[k].(map[string]any), sortedKeys(sub))
			} else if fmt.Sprint(b[k]) != fmt.Sprint(a[k]) {
				out = append(out, Change{Key: prefix + k, From: b[k], To: a[k]})
			}
		}
	}
	b := before.Settings()
	walk("", b, after.Settings(), sortedKeys(b))
	return out
}

// Change is one setting that differs.
type Change struct {
	Key      string
	From, To any
}

func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

// formatDuration writes d in the largest whole unit, the way people write
// configuration ("1500ms", "24h", "5m"), rather than time.Duration.String's
// "1.5s" and "24h0m0s"; time.ParseDuration reads both.
func formatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	case d%time.Millisecond == 0:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	}
	return d.String()
}
