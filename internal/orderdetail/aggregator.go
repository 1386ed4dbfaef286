package orderdetail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// Errors of Get that end the request without a page.
var (
	// ErrOrderNotFound: the order service says the order does not exist.
	ErrOrderNotFound = errors.New("order not found")
	// ErrOrderUnavailable: the order is neither live nor cached.
	ErrOrderUnavailable = errors.New("order unavailable")
)

// Page is the assembled order-detail answer.
type Page struct {
	OrderID  string
	Degraded bool      // any section is not live
	Sections []Section // in registration order, the core first
}

// Observer hears what the aggregation decides that no guard sees: last-good
// lookups. Telemetry implements it; nil is allowed.
type Observer interface {
	// CacheLookup reports a last-good read for dep: outcome is "hit", or for
	// a miss "absent", "stale", "corrupt" or "error".
	CacheLookup(ctx context.Context, dep, outcome string)
}

// Config wires an Aggregator.
type Config struct {
	// Core is the order (see NewCore); Sections are the degradable others.
	Core     *Downstream
	Sections []*Downstream
	// Store holds last-good answers; CacheGuard protects reads from it so a
	// sick store costs little once its breaker is open.
	Store      LastGood
	CacheGuard *resilience.Guard
	// Reserve is kept back from the request's deadline for fallbacks,
	// assembly and encoding: dependency calls end this much before it.
	Reserve  time.Duration
	Now      func() time.Time // the clock of as_of and of max ages; nil: time.Now
	Observer Observer         // nil: none
}

// Aggregator builds order-detail pages. It is safe for concurrent use.
type Aggregator struct {
	downstreams []*Downstream // core first
	store       LastGood
	cacheGuard  *resilience.Guard
	reserve     time.Duration
	now         func() time.Time
	obs         Observer
	gate        coreGate
}

// New builds an Aggregator. It fails when Core is not from NewCore, a
// section not from NewSection, a section name is used twice, or Store or
// CacheGuard is missing.
func New(cfg Config) (*Aggregator, error) {
	if cfg.Core == nil || !cfg.Core.core || cfg.Core.guard == nil {
		return nil, errors.New("orderdetail: Config.Core must come from NewCore")
	}
	if cfg.Store == nil || cfg.CacheGuard == nil {
		return nil, errors.New("orderdetail: Store and CacheGuard are required")
	}
	seen := map[string]bool{cfg.Core.name: true}
	for _, d := range cfg.Sections {
		if d == nil || d.core || d.fallback == nil || d.guard == nil {
			return nil, errors.New("orderdetail: every section must come from NewSection")
		}
		if seen[d.name] {
			return nil, fmt.Errorf("orderdetail: section %q registered twice", d.name)
		}
		seen[d.name] = true
	}
	a := &Aggregator{
		downstreams: append([]*Downstream{cfg.Core}, cfg.Sections...),
		store:       cfg.Store,
		cacheGuard:  cfg.CacheGuard,
		reserve:     cfg.Reserve,
		now:         cfg.Now,
		obs:         cfg.Observer,
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
}

// call is one dependency's part of one page: what resolve is asked, and
// what it answers.
type call struct {
	d       *Downstream
	orderID string
	end     time.Time // the calls' end: the page's deadline − Reserve; zero without a deadline

	section Section
	liveAt  time.Time // when the live answer arrived; zero when not live
}

// Get assembles the page for orderID under ctx's deadline.
//
// Every dependency is called at once, each through its own guard, and
// every call ends by the deadline − Reserve: the reserve is the fallbacks'.
// No section's failure cancels another, except the core's: without the
// order there is no page, so Get then stops the others and returns
// ErrOrderNotFound (the order service said so: no fallback, no health
// charge) or ErrOrderUnavailable (neither live nor cached).
//
// While the order's breaker refuses calls, the order is resolved first,
// alone (see coreGate): a page that can only be a 503 calls nobody else.
//
// Every live section is handed to the last-good store; a section with
// neither a live nor a cached answer gets its semantic default.
func (a *Aggregator) Get(ctx context.Context, orderID string) (*Page, error) {
	ctx, abandon := context.WithCancel(ctx) // abandon: no page, stop the calls
	defer abandon()
	var end time.Time
	if dl, ok := ctx.Deadline(); ok {
		end = dl.Add(-a.reserve)
	}
	calls := make([]call, len(a.downstreams))
	for i, d := range a.downstreams {
		calls[i] = call{d: d, orderID: orderID, end: end}
	}

	var wg sync.WaitGroup
	callOthers := func() {
		for i := 1; i < len(calls); i++ {
			wg.Go(func() { a.resolve(ctx, &calls[i]) })
		}
	}
	coreFirst := a.gate.coreFirst()
	if !coreFirst {
		callOthers() // the usual case: a slow order overlaps the others
	}
	core := &calls[0]
	a.resolve(ctx, core)
	a.gate.settle(core.section.Err)
	if core.section.Body == nil {
		abandon()
		wg.Wait()
		if errors.Is(core.section.Err, ErrNotFound) {
			return nil, fmt.Errorf("orderdetail: %s: %w", orderID, ErrOrderNotFound)
		}
		return nil, fmt.Errorf("orderdetail: %s: %w: %w", orderID, ErrOrderUnavailable, core.section.Err)
	}
	if coreFirst {
		callOthers() // a cached order: the page can be served after all
	}
	wg.Wait()

	page := &Page{OrderID: orderID, Sections: make([]Section, len(calls))}
	for i := range calls {
		c := &calls[i]
		if c.section.Body == nil {
			c.section.Body = c.d.fallback(core.section.Body)
		}
		page.Sections[i] = c.section
		page.Degraded = page.Degraded || c.section.Degraded
	}
	a.remember(ctx, calls)
	return page, nil
}

// resolve fills c.section: the dependency's live answer, by c.end at the
// latest, or else its last good answer. A section with neither keeps a nil
// Body (Get then ends the page, for the core, or fills in the default).
// ctx is the page's: cancelled, it wants no fallback.
func (a *Aggregator) resolve(ctx context.Context, c *call) {
	d := c.d
	c.section = Section{Name: d.name, BodyKey: d.bodyKey}
	v, err := resilience.DoUntil(ctx, d.guard, c.end, func(ctx context.Context) (any, error) { return d.fetch(ctx, c.orderID) })
	if err == nil {
		c.section.Source, c.section.Body, c.liveAt = SourceLive, v, a.now()
		return
	}
	c.section.Source, c.section.Degraded, c.section.Reason, c.section.Err = SourceFallback, true, ReasonOf(err), err
	if d.core && errors.Is(err, ErrNotFound) {
		return // the truth, not a failure: no fallback
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return // the page was abandoned, or its caller left
	}
	cached, err := resilience.Fallback(ctx, d.guard, err, func(ctx context.Context, _ error) (cachedSection, error) {
		return a.lastGood(ctx, d, c.orderID)
	})
	if err == nil {
		c.section.Source, c.section.Body, c.section.AsOf = SourceCache, cached.body, cached.asOf
	}
}

type cachedSection struct {
	body any
	asOf time.Time
}

var errNoLastGood = errors.New("no last-good answer")

// lastGood reads d's last good answer through the cache guard and checks
// its age, then its content with d's decoder: a cached answer is served only
// if a live one like it would have been. Its error wraps errNoLastGood.
func (a *Aggregator) lastGood(ctx context.Context, d *Downstream, orderID string) (cachedSection, error) {
	corrupt := false
	e, err := resilience.Do(ctx, a.cacheGuard, func(ctx context.Context) (CacheEntry, error) {
		e, err := a.store.Get(ctx, d.name, orderID)
		if errors.Is(err, ErrCacheMiss) {
			// A miss is a good answer from the store, a corrupt entry too.
			corrupt = errors.Is(err, ErrCacheCorrupt)
			return CacheEntry{}, nil
		}
		return e, err
	})
	outcome := "hit"
	switch {
	case err != nil:
		outcome = "error"
	case corrupt:
		outcome = "corrupt"
	case e.Payload == nil:
		outcome = "absent"
	case a.now().Sub(e.AsOf) > d.MaxAge():
		outcome = "stale"
	}
	var body any
	if outcome == "hit" {
		if body, err = d.decode(e.Payload, orderID); err != nil {
			outcome = "corrupt"
		}
	}
	d.guard.RecordCacheLookup(outcome == "hit")
	if a.obs != nil {
		a.obs.CacheLookup(ctx, d.guard.Name(), outcome) // metrics join on the guard's name
	}
	if outcome != "hit" {
		if err != nil {
			return cachedSection{}, fmt.Errorf("%s: %w (%s: %w)", d.name, errNoLastGood, outcome, err)
		}
		return cachedSection{}, fmt.Errorf("%s: %w (%s)", d.name, errNoLastGood, outcome)
	}
	return cachedSection{body: body, asOf: e.AsOf}, nil
}

// remember hands every live section to the last-good store, which writes
// behind and skips a rewrite identical to its stored copy. ctx is the
// request's, so that the write can be traced back to it.
func (a *Aggregator) remember(ctx context.Context, calls []call) {
	for _, c := range calls {
		if c.liveAt.IsZero() {
			continue
		}
		payload, err := json.Marshal(c.section.Body)
		if err != nil {
			continue // our own types always marshal; nothing to remember otherwise
		}
		a.store.PutContext(ctx, c.d.name, c.orderID, CacheEntry{AsOf: c.liveAt, Payload: payload}, c.d.MaxAge())
	}
}
