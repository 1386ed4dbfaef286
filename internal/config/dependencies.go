package config

import (
	"errors"
	"fmt"
	"reflect"
	"time"

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
	// the four downstreams and is not allowed for "cache" (the last-good store
	// itself has no last-good answer).
	CacheMaxAge time.Duration `yaml:"cache_max_age" json:"cache_max_age"`
}

// Dependencies holds the settings of every dependency. Each field's yaml key
// is the dependency's name, as used in the --config file, the admin API and
// /v1/resilience.
type Dependencies struct {
	Order     Dependency `yaml:"order"`
	Inventory Dependency `yaml:"inventory"`
	Coupon    Dependency `yaml:"coupon"`
	Logistics Dependency `yaml:"logistics"`
	// Cache guards the last-good reads made when a downstream fails.
	Cache Dependency `yaml:"cache"`
}

// Names of the dependencies, in the fixed order every listing uses.
const (
	NameOrder     = "order"
	NameInventory = "inventory"
	NameCoupon    = "coupon"
	NameLogistics = "logistics"
	NameCache     = "cache"
)

// Names returns the dependency names in their fixed order: order, inventory,
// coupon, logistics, cache. The slice is the caller's to keep.
func (Dependencies) Names() []string {
	return []string{NameOrder, NameInventory, NameCoupon, NameLogistics, NameCache}
}

// Get returns a pointer to the named dependency's settings inside d, so a
// caller may read or replace them, and false for an unknown name.
func (d *Dependencies) Get(name string) (*Dependency, bool) {
	switch name {
	case NameOrder:
		return &d.Order, true
	case NameInventory:
		return &d.Inventory, true
	case NameCoupon:
		return &d.Coupon, true
	case NameLogistics:
		return &d.Logistics, true
	case NameCache:
		return &d.Cache, true
	}
	return nil, false
}

// DefaultDependencies returns the built-in settings, every field filled in
// (resilience.Config.WithDefaults supplies what is not set here). The numbers
// come from a 1500ms page budget with 100ms kept in reserve; config.example.yaml
// at the repository root repeats them with the same reasons, and a test keeps
// the two equal.
func DefaultDependencies() Dependencies {
	return Dependencies{
		// The order is the core of the page: without it (live or cached) the
		// answer is a 503. So it gets the largest sub-budget that still leaves
		// room for a cache read and the reserve (1000+50+100 < 1500), twice
		// the concurrency of the optional sections because every request
		// needs it, and one retry (never three: a second retry could not fit).
		// Its header data changes rarely and the section carries as_of, so a
		// day-old copy beats an error page.
		Order: dependency(resilience.Config{
			Timeout:  1000 * time.Millisecond,
			Bulkhead: resilience.BulkheadConfig{MaxConcurrent: 100},
			Retry:    resilience.RetryConfig{MaxAttempts: 2},
		}, 24*time.Hour),
		// Stock is secondary (its default is "UNKNOWN", never "0") and moves
		// fast: a copy older than a minute could promise stock that is gone.
		Inventory: dependency(resilience.Config{
			Timeout:  600 * time.Millisecond,
			Bulkhead: resilience.BulkheadConfig{MaxConcurrent: 50},
		}, 60*time.Second),
		// Coupons decorate the page; an empty list is an honest default, so
		// they get the smallest budget. Campaigns change over minutes.
		Coupon: dependency(resilience.Config{
			Timeout:  300 * time.Millisecond,
			Bulkhead: resilience.BulkheadConfig{MaxConcurrent: 50},
		}, 5*time.Minute),
		// Shipment status moves with scan events, tens of minutes apart.
		Logistics: dependency(resilience.Config{
			Timeout:  500 * time.Millisecond,
			Bulkhead: resilience.BulkheadConfig{MaxConcurrent: 50},
		}, 30*time.Minute),
		// The last-good reads run inside the reserve, after a downstream has
		// already failed: a Redis nearby answers in about a millisecond, so
		// 50ms is generous; they come in bursts (up to four per request when a
		// downstream fails for everyone), hence 100 slots; a retry would eat
		// the reserve and the semantic default is next anyway; and the breaker
		// needs 20 calls before judging Redis, like the others.
		Cache: dependency(resilience.Config{
			Timeout:  50 * time.Millisecond,
			Bulkhead: resilience.BulkheadConfig{MaxConcurrent: 100},
			Retry:    resilience.RetryConfig{MaxAttempts: 1},
			Breaker:  resilience.BreakerConfig{MinRequests: 20},
		}, 0),
	}
}

func dependency(c resilience.Config, maxAge time.Duration) Dependency {
	return Dependency{Config: c.WithDefaults(), CacheMaxAge: maxAge}
}

// Validate reports every invalid setting of d, naming each by its key
// ("breaker.window: …"). Like resilience.Config.Validate it checks values
// after defaults. The rules that depend on which dependency d is, or on the
// request deadline, are Dependencies.Validate's.
func (d Dependency) Validate() error {
	errs := flatten(d.Config.Validate())
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
	for _, name := range d.Names() {
		dep, _ := d.Get(name)
		if dep.Timeout >= deadline {
			errs = append(errs, &keyError{
				key: "dependencies." + name + ".timeout",
				err: fmt.Errorf("%s must be shorter than --deadline (%s) %s", formatDuration(dep.Timeout), envName("deadline"), formatDuration(deadline)),
			})
		}
		// A last-good read runs inside the fallback's bound. If that bound
		// were not longer than the cache's own sub-budget, a slow store would
		// be cut short by the fallback — counted as the caller's deadline,
		// which never opens the cache's breaker — instead of timing out in
		// its own guard, where it counts.
		if name != NameCache && dep.FallbackTimeout <= d.Cache.Timeout {
			errs = append(errs, &keyError{
				key: "dependencies." + name + ".fallback_timeout",
				err: fmt.Errorf("%s must be longer than dependencies.cache.timeout %s", formatDuration(dep.FallbackTimeout), formatDuration(d.Cache.Timeout)),
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
		dep, _ := d.Get(name)
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
	next, err := PatchDependency(*cur, body)
	if err != nil {
		return Dependencies{}, under("dependencies."+name, err)
	}
	out := d
	slot, _ := out.Get(name)
	*slot = next
	if err := out.Validate(deadline); err != nil {
		return Dependencies{}, err
	}
	return out, nil
}

// Settings returns d as a tree of maps keyed like the --config file, with
// durations written as in the file ("300ms", "24h"), so the admin API can
// show the settings in force in the same form it accepts in a PATCH body.
func (d Dependency) Settings() map[string]any {
	return settingsOf(reflect.ValueOf(d))
}

func settingsOf(v reflect.Value) map[string]any {
	out := make(map[string]any)
	for _, f := range fieldsOf(v.Type()) {
		fv := v.FieldByIndex(f.index)
		switch {
		case fv.Type() == durationType:
			out[f.key] = formatDuration(time.Duration(fv.Int()))
		case fv.Kind() == reflect.Struct:
			out[f.key] = settingsOf(fv)
		default:
			out[f.key] = fv.Interface()
		}
	}
	return out
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
