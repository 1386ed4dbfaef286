// Package registry is the one place where the order-detail page's
// downstreams are registered. An entry gives a downstream's name, its place
// and key in the page, its default resilience settings (with the reason for
// each number) and how to build its section from a client and a semantic
// default. Everything else is derived from this list: the --NAME-url flags
// and their environment twins, the --config file's keys, the admin API's
// paths, the guards, /v1/resilience, the metrics' labels and the order of
// the page's sections.
//
// Adding a downstream is one entry here, plus its API (path and decoder) in
// internal/downstream and its answer type and semantic default in
// internal/orderdetail; docs/adding-a-dependency.md walks through it.
package registry

import (
	"fmt"
	"time"

	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Downstream is one registered downstream.
type Downstream struct {
	// Name identifies the dependency everywhere: its --NAME-url flag, its
	// key in the --config file and the admin API, its guard in
	// /v1/resilience and its label in the metrics.
	Name string
	// Section is the page's JSON key for its answer ("coupons").
	Section string
	// Core marks the order: without it (live or cached) there is no page.
	Core bool
	// Defaults are the guard's built-in settings, completed by
	// resilience.Config.WithDefaults; the --config file overrides them.
	Defaults resilience.Config
	// CacheMaxAge is how old a last-good answer may be and still be served.
	CacheMaxAge time.Duration
	// New builds the section; make it with SectionOf (or CoreOf for the
	// order).
	New Builder
}

// Builder makes downstream d's page section from its client's settings, its
// guard and its maximum cache age, and returns the function that closes the
// client's idle connections.
type Builder func(d Downstream, c downstream.Config, g *resilience.Guard, maxAge time.Duration) (orderdetail.Dependency, func(), error)

// Build returns the downstream's page section, calling through a new client
// configured by c and guarded by g, and the function that closes that
// client's idle connections.
func (d Downstream) Build(c downstream.Config, g *resilience.Guard, maxAge time.Duration) (orderdetail.Dependency, func(), error) {
	if d.New == nil {
		return orderdetail.Dependency{}, nil, fmt.Errorf("%s: no builder registered", d.Name)
	}
	dep, closeFn, err := d.New(d, c, g, maxAge)
	if err != nil {
		return orderdetail.Dependency{}, nil, fmt.Errorf("%s client: %w", d.Name, err)
	}
	return dep, closeFn, nil
}

// CoreOf is the Builder of the order section: the one without which there
// is no page.
func CoreOf(api downstream.API[orderdetail.Order]) Builder {
	return func(d Downstream, c downstream.Config, g *resilience.Guard, maxAge time.Duration) (orderdetail.Dependency, func(), error) {
		if d.Section != "order" { // orderdetail.NewCore's page and cache key
			return orderdetail.Dependency{}, nil, fmt.Errorf("the core's section must be \"order\", not %q", d.Section)
		}
		api.Name = d.Name // the client's label is the entry's name, as the guard's
		cl, err := downstream.NewClient(api, c)
		if err != nil {
			return orderdetail.Dependency{}, nil, err
		}
		return orderdetail.NewCore(g, maxAge, cl.Get, orderdetail.CacheDecoder(api.DecodeCached)), cl.Close, nil
	}
}

// SectionOf is the Builder of a degradable section: its answer is a T,
// fetched through a downstream.Client of api, and fallback states
// "unknown" in the section's own terms when there is neither a live nor a
// cached answer.
func SectionOf[T any](api downstream.API[T], fallback func(orderdetail.Order) T) Builder {
	return func(d Downstream, c downstream.Config, g *resilience.Guard, maxAge time.Duration) (orderdetail.Dependency, func(), error) {
		api.Name = d.Name // the client's label is the entry's name, as the guard's
		cl, err := downstream.NewClient(api, c)
		if err != nil {
			return orderdetail.Dependency{}, nil, err
		}
		return orderdetail.NewSection(d.Section, g, maxAge, cl.Get, fallback, orderdetail.CacheDecoder(api.DecodeCached)), cl.Close, nil
	}
}

// downstreams is the registry, in page order. The numbers come from a
// 1500ms page budget with 100ms kept in reserve. No entry sets its bulkhead:
// internal/config sizes each from --max-inflight, so admission, not a
// bulkhead, is where orderagg sheds its own overload (an entry may still set
// one, and a start-up warning then says when it is too small); config.example.yaml at the
// repository root repeats them with the same reasons, and a test keeps the
// two equal.
var downstreams = []Downstream{
	{
		// The order is the core of the page: without it (live or cached) the
		// answer is a 503. So it gets the largest sub-budget that still
		// leaves room for a cache read and the reserve (1000+50+100 < 1500),
		// and one retry (never three: a second retry could not fit). Its header data changes rarely and the section carries
		// as_of, so a day-old copy beats an error page.
		Name: "order", Section: "order", Core: true,
		Defaults: resilience.Config{
			Timeout: 1000 * time.Millisecond,
			Retry:   resilience.RetryConfig{MaxAttempts: 2},
		},
		CacheMaxAge: 24 * time.Hour,
		New:         CoreOf(downstream.OrderAPI),
	},
	{
		// Stock is secondary (its default is "UNKNOWN", never "0") and moves
		// fast: a copy older than a minute could promise stock that is gone.
		Name: "inventory", Section: "inventory",
		Defaults: resilience.Config{
			Timeout: 600 * time.Millisecond,
		},
		CacheMaxAge: 60 * time.Second,
		New:         SectionOf(downstream.InventoryAPI, orderdetail.UnknownInventory),
	},
	{
		// Coupons decorate the page; an empty list is an honest default, so
		// they get the smallest budget. Campaigns change over minutes.
		Name: "coupon", Section: "coupons",
		Defaults: resilience.Config{
			Timeout: 300 * time.Millisecond,
		},
		CacheMaxAge: 5 * time.Minute,
		New:         SectionOf(downstream.CouponAPI, orderdetail.NoCoupons),
	},
	{
		// Shipment status moves with scan events, tens of minutes apart.
		Name: "logistics", Section: "logistics",
		Defaults: resilience.Config{
			Timeout: 500 * time.Millisecond,
		},
		CacheMaxAge: 30 * time.Minute,
		New:         SectionOf(downstream.LogisticsAPI, orderdetail.UnknownLogistics),
	},
}

// Downstreams returns the registered downstreams in page order, the core
// first. The slice is the caller's to keep.
func Downstreams() []Downstream {
	return append([]Downstream(nil), downstreams...)
}

// Names returns the registered downstreams' names in page order.
func Names() []string {
	out := make([]string, len(downstreams))
	for i, d := range downstreams {
		out[i] = d.Name
	}
	return out
}

// Lookup returns the downstream called name.
func Lookup(name string) (Downstream, bool) {
	for _, d := range downstreams {
		if d.Name == name {
			return d, true
		}
	}
	return Downstream{}, false
}
