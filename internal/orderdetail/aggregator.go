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
	Core     Downstream
	Sections []Downstream
	// Store holds last-good answers; CacheGuard protects reads from it so a
	// sick store costs ~nothing once its breaker is open.
	Store      LastGood
	CacheGuard *resilience.Guard
	// Reserve is kept back from the request's deadline for fallbacks,
	// assembly and encoding: dependency calls must end this much before it.
	Reserve  time.Duration
	Now      func() time.Time // defaults to time.Now
	Observer Observer
	// RewriteInterval: a live answer of the same dependency for the same
	// order is considered for the store at most once per interval, and
	// written only if its content changed since the copy last written or
	// that copy's age passed a quarter of the section's max age (see
	// writeThrottle). 0 writes every live answer.
	RewriteInterval time.Duration
}

// Aggregator builds order-detail pages. It is safe for concurrent use.
type Aggregator struct {
	downstreams []Downstream // core first
	store       LastGood
	cacheGuard  *resilience.Guard
	reserve     time.Duration
	now         func() time.Time
	obs         Observer
	throttle    *writeThrottle
	gate        coreGate
	workers     *workers
}

// maxIdleWorkers bounds the goroutines kept waiting for the sections' calls
// (see workers): three per page in flight for 85 concurrent pages. More
// concurrent pages start goroutines of their own, as without the pool.
const maxIdleWorkers = 256

// New builds an Aggregator.
func New(cfg Config) (*Aggregator, error) {
	if !cfg.Core.core {
		return nil, errors.New("orderdetail: Config.Core must come from NewCore")
	}
	if cfg.Store == nil || cfg.CacheGuard == nil {
		return nil, errors.New("orderdetail: Store and CacheGuard are required")
	}
	if n := 1 + len(cfg.Sections); n > maxThrottledSections {
		return nil, fmt.Errorf("orderdetail: %d dependencies, at most %d", n, maxThrottledSections)
	}
	seen := map[string]bool{cfg.Core.name: true}
	for _, d := range cfg.Sections {
		if d.core || d.fallback == nil || d.guard == nil {
			return nil, fmt.Errorf("orderdetail: section %q must come from NewSection", d.name)
		}
		if seen[d.name] {
			return nil, fmt.Errorf("orderdetail: section %q registered twice", d.name)
		}
		seen[d.name] = true
	}
	a := &Aggregator{
		downstreams: append([]Downstream{cfg.Core}, cfg.Sections...),
		store:       cfg.Store,
		cacheGuard:  cfg.CacheGuard,
		reserve:     cfg.Reserve,
		now:         cfg.Now,
		obs:         cfg.Observer,
		throttle:    newWriteThrottle(cfg.RewriteInterval),
		workers:     newWorkers(maxIdleWorkers),
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
}

// Close stops the goroutines that wait to make the sections' calls, once
// the calls in flight have returned. A Get after Close still works, on
// goroutines of its own.
func (a *Aggregator) Close() { a.workers.Close() }

// Get assembles the page for orderID under ctx's deadline.
//
// All dependencies are called at once, each through its own guard and
// sub-budget, all ending Reserve before ctx's deadline. No section's failure
// cancels another — only the deadline does — except the core's: without the
// order there is no page, so its failure cancels the rest and Get returns
// ErrOrderNotFound or ErrOrderUnavailable at once. Otherwise Get returns when
// every section has settled; each is bounded by its sub-budget plus a cache
// read, so the page never waits on a section that has already failed.
//
// While the order's breaker refuses calls, the order is resolved first, alone
// (see coreGate): a page that can only be a 503 calls no other dependency.
func (a *Aggregator) Get(ctx context.Context, orderID string) (*Page, error) {
	// The calls run on work and end by callsEnd, Reserve before the page's
	// deadline; the fallbacks run on ctx and so keep the reserve. Cancelling
	// work abandons the page: the calls stop and no fallback follows
	// (resolve). callsEnd is not work's deadline: each call's guard cuts
	// the call there with the timer of its sub-budget, where a deadline of
	// work's own would add a timer per page (see resilience.DoUntil).
	work, abandonPage := context.WithCancel(ctx)
	defer abandonPage()
	var callsEnd time.Time
	if dl, ok := ctx.Deadline(); ok {
		callsEnd = dl.Add(-a.reserve)
	}

	sections := make([]Section, len(a.downstreams))
	liveAt := make([]time.Time, len(a.downstreams))
	var wg sync.WaitGroup
	callOthers := func() {
		wg.Add(len(a.downstreams) - 1)
		for i := 1; i < len(a.downstreams); i++ {
			a.workers.Go(func() {
				defer wg.Done()
				sections[i], liveAt[i] = a.resolve(work, callsEnd, ctx, a.downstreams[i], orderID)
			})
		}
	}
	coreFirst := a.gate.coreFirst()
	if !coreFirst {
		callOthers() // the usual case: a slow order overlaps the others
	}
	sections[0], liveAt[0] = a.resolve(work, callsEnd, ctx, a.downstreams[0], orderID)
	a.gate.settle(sections[0].Err)

	core := sections[0]
	if core.Body == nil {
		abandonPage() // no page: stop the others now, then wait for them
		wg.Wait()
		if errors.Is(core.Err, ErrNotFound) {
			return nil, fmt.Errorf("orderdetail: %s: %w", orderID, ErrOrderNotFound)
		}
		return nil, fmt.Errorf("orderdetail: %s: %w: %w", orderID, ErrOrderUnavailable, core.Err)
	}
	if coreFirst {
		callOthers() // a cached order: the page can be served after all
	}
	wg.Wait()

	order := core.Body.(Order)
	page := &Page{OrderID: orderID, Sections: sections}
	for i := range sections {
		s := &sections[i]
		if s.Body == nil {
			s.Body = a.downstreams[i].fallback(order)
		}
		page.Degraded = page.Degraded || s.Degraded
	}
	a.remember(ctx, orderID, sections, liveAt)
	return page, nil
}

// resolve fetches one section live, by callsEnd at the latest, or else its
// last good answer. A section with neither comes back with a nil Body (and,
// for the core, ends the request); Get fills in the semantic default once
// the order is known.
func (a *Aggregator) resolve(work context.Context, callsEnd time.Time, page context.Context, d Downstream, orderID string) (Section, time.Time) {
	s := Section{Name: d.name, BodyKey: d.bodyKey}
	v, err := resilience.DoUntil(work, d.guard, callsEnd, func(ctx context.Context) (any, error) { return d.fetch(ctx, orderID) })
	if err == nil {
		s.Source, s.Body = SourceLive, v
		return s, a.now()
	}
	s.Source, s.Degraded, s.Reason, s.Err = SourceFallback, true, ReasonOf(err), err
	if d.core && errors.Is(err, ErrNotFound) {
		return s, time.Time{} // the truth, not a failure: no fallback
	}
	if errors.Is(work.Err(), context.Canceled) {
		return s, time.Time{} // the page was abandoned, or its caller left: nobody needs a fallback
	}
	// The fallback runs on the page's context, not the spent work budget: it
	// has the reserve, bounded further by the guard's FallbackTimeout.
	cached, ferr := resilience.Fallback(page, d.guard, err, func(ctx context.Context, _ error) (cachedSection, error) {
		return a.lastGood(ctx, d, orderID)
	})
	if ferr == nil {
		s.Source, s.Body, s.AsOf = SourceCache, cached.body, cached.asOf
	}
	return s, time.Time{}
}

type cachedSection struct {
	body any
	asOf time.Time
}

var errNoLastGood = errors.New("no last-good answer")

// lastGood reads d's last good answer through the cache guard and checks
// its age, then its content with d's decoder: a cached answer is served only
// if a live one like it would have been.
func (a *Aggregator) lastGood(ctx context.Context, d Downstream, orderID string) (cachedSection, error) {
	type read struct {
		e       CacheEntry
		corrupt bool
	}
	r, err := resilience.Do(ctx, a.cacheGuard, func(ctx context.Context) (read, error) {
		e, err := a.store.Get(ctx, d.name, orderID)
		if errors.Is(err, ErrCacheMiss) {
			// A miss is a good answer from the store, a corrupt entry too.
			return read{corrupt: errors.Is(err, ErrCacheCorrupt)}, nil
		}
		return read{e: e}, err
	})
	e := r.e
	outcome := "hit"
	switch {
	case err != nil:
		outcome = "error"
	case r.corrupt:
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
		if err != nil && outcome == "corrupt" {
			return cachedSection{}, fmt.Errorf("%s: %w (%s: %w)", d.name, errNoLastGood, outcome, err)
		}
		return cachedSection{}, fmt.Errorf("%s: %w (%s)", d.name, errNoLastGood, outcome)
	}
	return cachedSection{body: body, asOf: e.AsOf}, nil
}

// remember hands every live section to the last-good store, off the
// request path. ctx is the request's, so that the write can be traced back
// to it.
func (a *Aggregator) remember(ctx context.Context, orderID string, sections []Section, liveAt []time.Time) {
	key, due := a.throttle.due(orderID, liveAt) // liveAt is zero for a section not live
	for i, s := range sections {
		if due&(1<<i) == 0 {
			continue
		}
		payload, err := json.Marshal(s.Body)
		if err != nil {
			continue // our own types always marshal; nothing to remember otherwise
		}
		maxAge := a.downstreams[i].MaxAge()
		if !a.throttle.changed(key, i, payload, liveAt[i], a.throttle.refreshAfter(maxAge)) {
			continue
		}
		a.store.PutContext(ctx, s.Name, orderID, CacheEntry{AsOf: liveAt[i], Payload: payload}, maxAge)
	}
}
