package downstream

// The registry is the one place where the order-detail page's downstreams
// are registered. An entry gives a downstream's name, its place and key in
// the page, its default resilience settings (with the reason for each
// number) and how to build its section from its API and a semantic default.
// Everything else is derived from this list: the --NAME-url flags and their
// environment twins, the --config file's keys, the admin API's paths, the
// guards, /v1/resilience, the metrics' labels and the order of the page's
// sections.
//
// It lives beside the APIs it registers (clients.go), so adding a
// downstream is one entry here and its API (path and decoders) in this
// package, plus its answer type and semantic default in
// internal/orderdetail; docs/adding-a-dependency.md walks through it.

import (
	"fmt"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Entry is one registered downstream.
type Entry struct {
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
	// About says in one line what the section is and what its semantic
	// default states; it heads the entry's section of config.example.yaml.
	About string
	// Why gives the reason for each default the entry chooses, by its key in
	// the --config file ("timeout", "retry.max_attempts", "cache_max_age"):
	// config.example.yaml is generated with it beside the value.
	// internal/config gives the reasons of the defaults every dependency
	// shares, and refuses an entry that sets a default without saying why.
	Why map[string]string
	// New builds the section; make it with SectionOf (or CoreOf for the
	// order).
	New Builder
}

// Builder makes entry e's downstream, as the page calls it, from its
// client's settings, its guard and its maximum cache age, and returns the function that closes the
// client's idle connections.
type Builder func(e Entry, c Config, g *resilience.Guard, maxAge time.Duration) (*orderdetail.Downstream, func(), error)

// Build returns the downstream as the page calls it, through a new client
// configured by c and guarded by g, and the function that closes that
// client's idle connections.
func (e Entry) Build(c Config, g *resilience.Guard, maxAge time.Duration) (*orderdetail.Downstream, func(), error) {
	if e.New == nil {
		return nil, nil, fmt.Errorf("%s: no builder registered", e.Name)
	}
	d, closeFn, err := e.New(e, c, g, maxAge)
	if err != nil {
		return nil, nil, fmt.Errorf("%s client: %w", e.Name, err)
	}
	return d, closeFn, nil
}

// CoreOf is the Builder of the order section: the one without which there
// is no page.
func CoreOf(api API[orderdetail.Order]) Builder {
	return func(e Entry, c Config, g *resilience.Guard, maxAge time.Duration) (*orderdetail.Downstream, func(), error) {
		if e.Section != "order" { // orderdetail.NewCore's page and cache key
			return nil, nil, fmt.Errorf("the core's section must be \"order\", not %q", e.Section)
		}
		api.Name = e.Name // the client's label is the entry's name, as the guard's
		cl, err := NewClient(api, c)
		if err != nil {
			return nil, nil, err
		}
		return orderdetail.NewCore(g, maxAge, cl.Get, orderdetail.CacheDecoder(api.DecodeCached)), cl.Close, nil
	}
}

// SectionOf is the Builder of a degradable section: its answer is a T,
// fetched through a Client of api, and fallback states
// "unknown" in the section's own terms when there is neither a live nor a
// cached answer.
func SectionOf[T any](api API[T], fallback func(orderdetail.Order) T) Builder {
	return func(e Entry, c Config, g *resilience.Guard, maxAge time.Duration) (*orderdetail.Downstream, func(), error) {
		api.Name = e.Name // the client's label is the entry's name, as the guard's
		cl, err := NewClient(api, c)
		if err != nil {
			return nil, nil, err
		}
		return orderdetail.NewSection(e.Section, g, maxAge, cl.Get, fallback, orderdetail.CacheDecoder(api.DecodeCached)), cl.Close, nil
	}
}

// registry is the list of downstreams, in page order. The numbers come from a
// 1500ms page budget with 100ms kept in reserve. No entry sets its bulkhead:
// internal/config sizes each from --max-inflight, so admission, not a
// bulkhead, is where orderagg sheds its own overload (an entry may still set
// one, and a start-up warning then says when it is too small). Each entry
// says why in About and Why, from which internal/config generates
// config.example.yaml at the repository root (go test ./internal/config
// -update).
var registry = []Entry{
	{
		Name: "order", Section: "order", Core: true,
		Defaults: resilience.Config{
			Timeout: 1000 * time.Millisecond,
			Retry:   resilience.RetryConfig{MaxAttempts: 2},
		},
		CacheMaxAge: 24 * time.Hour,
		About:       "the core section: without it (live or cached) the answer is a 503.",
		Why: map[string]string{
			"timeout":            "largest sub-budget that leaves a cache read and the reserve: 1000+50+100 < 1500",
			"retry.max_attempts": "one retry: a transient failure would cost the whole page; a third could not fit",
			"cache_max_age":      "header data changes rarely and the section shows as_of: a day-old order beats a 503",
		},
		New: CoreOf(OrderAPI),
	},
	{
		Name: "inventory", Section: "inventory",
		Defaults: resilience.Config{
			Timeout: 600 * time.Millisecond,
		},
		CacheMaxAge: 60 * time.Second,
		About:       "secondary: its default is status UNKNOWN, never 0 or OUT_OF_STOCK.",
		Why: map[string]string{
			"timeout":       "useful but optional, so well under the order's budget",
			"cache_max_age": "stock moves fast: an older copy could promise stock that is gone",
		},
		New: SectionOf(InventoryAPI, orderdetail.UnknownInventory),
	},
	{
		Name: "coupon", Section: "coupons",
		Defaults: resilience.Config{
			Timeout: 300 * time.Millisecond,
		},
		CacheMaxAge: 5 * time.Minute,
		About:       "decoration: its default is an empty list.",
		Why: map[string]string{
			"timeout":       "an empty list is an honest default, so the smallest budget",
			"cache_max_age": "campaigns change over minutes, not seconds",
		},
		New: SectionOf(CouponAPI, orderdetail.NoCoupons),
	},
	{
		Name: "logistics", Section: "logistics",
		Defaults: resilience.Config{
			Timeout: 500 * time.Millisecond,
		},
		CacheMaxAge: 30 * time.Minute,
		About:       "shipment status: its default is status UNKNOWN.",
		Why: map[string]string{
			"timeout":       "matters to the customer more than coupons, less than stock",
			"cache_max_age": "status moves with scan events, tens of minutes apart",
		},
		New: SectionOf(LogisticsAPI, orderdetail.UnknownLogistics),
	},
}

// Registered returns the registered downstreams in page order, the core
// first. The slice is the caller's to keep.
func Registered() []Entry {
	return append([]Entry(nil), registry...)
}

// Names returns the registered downstreams' names in page order.
func Names() []string {
	out := make([]string, len(registry))
	for i, e := range registry {
		out[i] = e.Name
	}
	return out
}
