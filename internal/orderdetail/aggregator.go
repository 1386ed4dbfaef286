// Package orderdetail assembles the order-detail page: every dependency
// called at once, each through its guard, and what to show for one that
// does not answer (its last good answer, else its semantic default). It
// knows nothing of HTTP or of the store behind LastGood.
package orderdetail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// Config wires an Aggregator.
type Config struct {
	Core     *Downstream   // the order, from NewCore
	Sections []*Downstream // the degradable others, from NewSection, in page order
	Store    LastGood
	// CacheGuard guards the reads of Store, so that a sick store costs
	// little once its breaker is open.
	CacheGuard *resilience.Guard
	// Reserve is kept back from the request's deadline for the fallbacks:
	// dependency calls end this much before it.
	Reserve  time.Duration
	Now      func() time.Time // the clock of as_of and of max ages; nil: time.Now
	Observer Observer         // nil: none
	// Workers is how many goroutines are kept for the sections' calls, until
	// Close; a call finding none idle gets a new one (0: every call does).
	Workers int
}

// Aggregator builds order-detail pages. It is safe for concurrent use.
type Aggregator struct {
	cfg         Config        // with Now set
	downstreams []*Downstream // the core first
	coreFirst   coreGate
	workers     *workers
}

// New builds an Aggregator. It fails when Core or a section is missing or
// not made by NewCore or NewSection, a section's name is taken, or Store
// or CacheGuard is missing.
func New(cfg Config) (*Aggregator, error) {
	if cfg.Core == nil || !cfg.Core.core || cfg.Core.guard == nil || cfg.Store == nil || cfg.CacheGuard == nil {
		return nil, errors.New("orderdetail: Core (from NewCore), Store and CacheGuard are required")
	}
	seen := map[string]bool{cfg.Core.name: true}
	for _, d := range cfg.Sections {
		if d == nil || d.core || d.fallback == nil || d.guard == nil || seen[d.name] {
			return nil, errors.New("orderdetail: every section must come from NewSection, under a name of its own")
		}
		seen[d.name] = true
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Aggregator{cfg: cfg, downstreams: append([]*Downstream{cfg.Core}, cfg.Sections...), workers: startWorkers(cfg.Workers)}, nil
}

// Close stops the goroutines kept for Workers, once their calls are done,
// and waits for them. Pages asked for later still work, on goroutines of
// their own. It is safe to call more than once.
func (a *Aggregator) Close() { a.workers.close() }

// call is one dependency's part of one page: what resolve is asked, and
// what it answers.
type call struct {
	d       *Downstream
	orderID string
	end     time.Time // the calls' end: the page's deadline − Reserve; zero without a deadline
	section Section
	liveAt  time.Time // when the live answer arrived; zero when not live
	// orderKnown is closed once the core's outcome is known, and the page
	// abandoned if there is none; nil for the core itself.
	orderKnown <-chan struct{}
}

// Get assembles the page for orderID under ctx's deadline.
//
// Every dependency is called at once, each through its guard, and every
// call ends by the deadline − Reserve. No section's failure stops another,
// except the core's: without the order there is no page, so Get then stops
// the others and returns ErrOrderNotFound (the order service says so: no
// fallback, no charge to its health) or ErrOrderUnavailable (neither live
// nor cached). A section without a live answer shows its last good one,
// read through the cache guard within the reserve, else its semantic
// default. Every live section is handed to the store.
//
// While the order's breaker refuses calls, the order can only come from
// the cache, and for an order not cached every other call would be thrown
// away with the 503. So after a short-circuited order call, pages resolve
// the order first, alone, and call the others only when there is an order
// to show; the order service's next answer (a page, or a 404) restores
// the overlap. The gate lags the breaker by a page at each transition.
func (a *Aggregator) Get(ctx context.Context, orderID string) (*Page, error) {
	ctx, abandon := context.WithCancel(ctx) // abandon: no page, stop every call
	defer abandon()
	var end time.Time
	if dl, ok := ctx.Deadline(); ok {
		end = dl.Add(-a.cfg.Reserve)
	}
	calls := make([]call, len(a.downstreams))
	orderKnown := make(chan struct{})
	for i, d := range a.downstreams {
		calls[i] = call{d: d, orderID: orderID, end: end, orderKnown: orderKnown}
	}
	calls[0].orderKnown = nil
	var wg sync.WaitGroup
	callOthers := func() {
		for i := 1; i < len(calls); i++ {
			a.workers.run(&wg, func() { a.resolve(ctx, &calls[i]) })
		}
	}
	coreFirst := a.coreFirst.Load()
	if !coreFirst {
		callOthers() // the usual case: a slow order overlaps the others
	}
	core := &calls[0]
	a.resolve(ctx, core)
	a.coreFirst.settle(core.section.Err)
	if core.section.Body == nil {
		abandon()
	}
	close(orderKnown)
	if core.section.Body == nil {
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
	for i, c := range calls {
		if c.section.Body == nil {
			c.section.Body = c.d.fallback(core.section.Body)
		}
		page.Sections[i] = c.section
		page.Degraded = page.Degraded || c.section.Degraded
	}
	a.remember(ctx, calls)
	return page, nil
}

// resolve fills c.section with the dependency's live answer, by c.end at
// the latest, or else its last good answer; with neither, Body stays nil.
// ctx is the page's: once cancelled, no fallback is wanted.
func (a *Aggregator) resolve(ctx context.Context, c *call) {
	d, s := c.d, &c.section
	*s = Section{Name: d.name, BodyKey: d.bodyKey}
	v, err := resilience.DoUntil(ctx, d.guard, c.end, func(ctx context.Context) (any, error) { return d.fetch(ctx, c.orderID) })
	if err == nil {
		s.Source, s.Body, c.liveAt = SourceLive, v, a.cfg.Now()
		s.BodyJSON, _ = json.Marshal(v) // the answer types always marshal
		return
	}
	s.Source, s.Degraded, s.Reason, s.Err = SourceFallback, true, ReasonOf(err), err
	if c.orderKnown != nil && errors.Is(err, ErrNotFound) {
		<-c.orderKnown // a section's 404 may be the order's: fall back only if there is a page
	}
	if d.core && errors.Is(err, ErrNotFound) || errors.Is(ctx.Err(), context.Canceled) {
		return // the truth, not a failure; or the page was abandoned, or its caller left
	}
	cached, err := resilience.Fallback(ctx, d.guard, err, func(ctx context.Context, _ error) (Section, error) {
		return a.lastGood(ctx, d, c.orderID)
	})
	if err == nil {
		s.Source, s.Body, s.AsOf = SourceCache, cached.Body, cached.AsOf
	}
}

// lastGood reads d's last good answer, as a Section's Body and AsOf,
// through the cache guard, and serves it only if it is young enough and
// d's decoder reads it as it would a live answer.
func (a *Aggregator) lastGood(ctx context.Context, d *Downstream, orderID string) (Section, error) {
	corrupt := false
	e, err := resilience.Do(ctx, a.cfg.CacheGuard, func(ctx context.Context) (CacheEntry, error) {
		e, err := a.cfg.Store.Get(ctx, d.name, orderID)
		if errors.Is(err, ErrCacheMiss) { // a good answer from the store, a corrupt entry too
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
	case a.cfg.Now().Sub(e.AsOf) > d.MaxAge():
		outcome = "stale"
	}
	var body any
	if outcome == "hit" {
		if body, err = d.decode(e.Payload, orderID); err != nil {
			outcome = "corrupt"
		}
	}
	d.guard.RecordCacheLookup(outcome == "hit")
	if a.cfg.Observer != nil {
		a.cfg.Observer.CacheLookup(ctx, d.guard.Name(), outcome) // metrics join on the guard's name
	}
	switch {
	case outcome == "hit":
		return Section{Body: body, AsOf: e.AsOf}, nil
	case err != nil:
		return Section{}, fmt.Errorf("%s: no last-good answer (%s: %w)", d.name, outcome, err)
	}
	return Section{}, fmt.Errorf("%s: no last-good answer (%s)", d.name, outcome)
}

// remember hands every live section to the store. ctx is the request's,
// so that the write can be traced back to it.
func (a *Aggregator) remember(ctx context.Context, calls []call) {
	for _, c := range calls {
		if c.section.BodyJSON != nil {
			a.cfg.Store.PutContext(ctx, c.d.name, c.orderID, CacheEntry{AsOf: c.liveAt, Payload: c.section.BodyJSON}, c.d.MaxAge())
		}
	}
}

// coreGate is set while the order's breaker refuses calls (see Get): by
// the last order call's outcome, not by asking the breaker. A live answer
// or a 404 clears it; a short circuit sets it; failures and timeouts leave
// it, for the breaker judges those.
type coreGate struct{ atomic.Bool }

func (g *coreGate) settle(err error) {
	switch {
	case err == nil || errors.Is(err, ErrNotFound):
		g.Store(false)
	case resilience.KindOf(err) == resilience.KindShortCircuited:
		g.Store(true)
	}
}
