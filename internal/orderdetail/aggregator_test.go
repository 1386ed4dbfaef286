package orderdetail

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orderagg/orderagg/internal/resilience"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore is an in-memory LastGood.
type fakeStore struct {
	mu      sync.Mutex
	entries map[string]CacheEntry
	getErr  error
	gets    int
	putCtx  []context.Context // the context of each PutContext
}

func newFakeStore() *fakeStore { return &fakeStore{entries: map[string]CacheEntry{}} }

func (f *fakeStore) Get(ctx context.Context, dep, id string) (CacheEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.getErr != nil {
		return CacheEntry{}, f.getErr
	}
	e, ok := f.entries[dep+"/"+id]
	if !ok {
		return CacheEntry{}, ErrCacheMiss
	}
	return e, nil
}

func (f *fakeStore) PutContext(ctx context.Context, dep, id string, e CacheEntry, ttl time.Duration) {
	f.mu.Lock()
	f.putCtx = append(f.putCtx, ctx)
	f.mu.Unlock()
	f.Put(dep, id, e, ttl)
}

// Put stores an entry as a test sets it up.
func (f *fakeStore) Put(dep, id string, e CacheEntry, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries[dep+"/"+id] = e
}

func (f *fakeStore) has(dep, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.entries[dep+"/"+id]
	return ok
}

// behaviour of a fake downstream.
type behaviour func(ctx context.Context) error

var (
	healthy behaviour = func(context.Context) error { return nil }
	broken  behaviour = func(context.Context) error { return errors.New("503 from downstream") }
	hung    behaviour = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	missing behaviour = func(context.Context) error {
		return resilience.BadRequest(fmt.Errorf("order: %w", ErrNotFound))
	}
)

type fakes struct {
	order, inventory, coupon, logistics behaviour
	// calls counts the calls each fake received, whatever they answered.
	orderCalls, otherCalls atomic.Int64
	// shipment, when set, is the logistics answer.
	shipment func() Logistics
}

var sampleOrder = Order{ID: "o-1", Items: []OrderItem{{SKU: "A", Quantity: 1}, {SKU: "B", Quantity: 2}}}

func intp(n int) *int { return &n }

func (f *fakes) GetOrder(ctx context.Context, id string) (Order, error) {
	f.orderCalls.Add(1)
	if err := f.order(ctx); err != nil {
		return Order{}, err
	}
	o := sampleOrder
	o.ID = id
	return o, nil
}

func (f *fakes) GetInventory(ctx context.Context, _ string) (Inventory, error) {
	f.otherCalls.Add(1)
	if err := f.inventory(ctx); err != nil {
		return Inventory{}, err
	}
	return Inventory{Status: InventoryConfirmed, Items: []StockItem{{SKU: "A", Available: intp(3), Status: StockLow}}}, nil
}

func (f *fakes) GetCoupons(ctx context.Context, _ string) (Coupons, error) {
	f.otherCalls.Add(1)
	if err := f.coupon(ctx); err != nil {
		return Coupons{}, err
	}
	return Coupons{Items: []Coupon{{Code: "SAVE5"}}}, nil
}

func (f *fakes) GetLogistics(ctx context.Context, _ string) (Logistics, error) {
	f.otherCalls.Add(1)
	if err := f.logistics(ctx); err != nil {
		return Logistics{}, err
	}
	if f.shipment != nil {
		return f.shipment(), nil
	}
	return Logistics{Status: "IN_TRANSIT"}, nil
}

type rig struct {
	agg   *Aggregator
	store *fakeStore
	f     *fakes
	now   time.Time
}

// newRig builds an aggregator over fakes, every guard built with cfgs[name]
// (one attempt unless set) and opts.
func newRig(t testing.TB, cfgs map[string]resilience.Config, opts ...resilience.Option) *rig {
	t.Helper()
	r := &rig{store: newFakeStore(), f: &fakes{order: healthy, inventory: healthy, coupon: healthy, logistics: healthy}, now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	guard := func(name string) *resilience.Guard {
		cfg := cfgs[name]
		if cfg.Retry.MaxAttempts == 0 {
			cfg.Retry.MaxAttempts = 1
		}
		if cfg.FallbackTimeout == 0 {
			// The fake store answers at once; the default 80 ms would let a
			// stalled test process turn a cached answer into a miss.
			cfg.FallbackTimeout = time.Minute
		}
		g, err := resilience.New(name, cfg, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	agg, err := New(Config{
		Core: newCore(guard("order"), 24*time.Hour, r.f.GetOrder),
		Sections: []*Downstream{
			newSection("inventory", guard("inventory"), time.Minute, r.f.GetInventory, UnknownInventory),
			newSection("coupons", guard("coupon"), 5*time.Minute, r.f.GetCoupons, NoCoupons),
			newSection("logistics", guard("logistics"), 30*time.Minute, r.f.GetLogistics, UnknownLogistics),
		},
		Store:      r.store,
		CacheGuard: guard("cache"),
		Reserve:    100 * time.Millisecond, // the production default
		Now:        func() time.Time { return r.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.agg = agg
	return r
}

func (r *rig) get(t *testing.T, deadline time.Duration) (*Page, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	return r.agg.Get(ctx, "o-1")
}

func section(p *Page, name string) Section {
	for _, s := range p.Sections {
		if s.Name == name {
			return s
		}
	}
	panic("no section " + name)
}

func TestAllLive(t *testing.T) {
	r := newRig(t, nil)
	p, err := r.get(t, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if p.Degraded {
		t.Fatal("healthy page degraded")
	}
	for _, s := range p.Sections {
		if s.Source != SourceLive || s.Degraded || s.Reason != "" {
			t.Errorf("%s: %+v", s.Name, s)
		}
	}
	if names := fmt.Sprint(sectionNames(p)); names != "[order inventory coupons logistics]" {
		t.Fatalf("order of sections %s", names)
	}
	if section(p, "order").BodyKey != "data" {
		t.Fatal("order body must nest under data")
	}
	for _, dep := range []string{"order", "inventory", "coupons", "logistics"} {
		if !r.store.has(dep, "o-1") {
			t.Errorf("live %s not remembered", dep)
		}
	}
}

func sectionNames(p *Page) []string {
	var out []string
	for _, s := range p.Sections {
		out = append(out, s.Name)
	}
	return out
}

func TestSemanticDefaults(t *testing.T) {
	r := newRig(t, map[string]resilience.Config{
		"logistics": {Timeout: 10 * time.Millisecond},
	})
	r.f.inventory, r.f.coupon, r.f.logistics = broken, broken, hung
	p, err := r.get(t, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Degraded || section(p, "order").Degraded {
		t.Fatalf("page degraded=%v, order degraded=%v", p.Degraded, section(p, "order").Degraded)
	}
	inv := section(p, "inventory")
	if inv.Source != SourceFallback || !inv.Degraded || inv.Reason != ReasonFailure {
		t.Fatalf("inventory %+v", inv)
	}
	body := inv.Body.(Inventory)
	if body.Status != InventoryUnknown || len(body.Items) != 2 {
		t.Fatalf("inventory body %+v", body)
	}
	for _, it := range body.Items {
		if it.Available != nil || it.Status != StockUnknown {
			t.Fatalf("fabricated stock %+v", it)
		}
	}
	if c := section(p, "coupons"); c.Body.(Coupons).Items == nil || len(c.Body.(Coupons).Items) != 0 || c.Reason != ReasonFailure {
		t.Fatalf("coupons %+v", c)
	}
	if l := section(p, "logistics"); l.Body.(Logistics).Status != LogisticsUnknown || l.Reason != ReasonTimeout {
		t.Fatalf("logistics %+v", l)
	}
	if r.store.has("inventory", "o-1") {
		t.Fatal("a fallback was remembered as last good")
	}
}

func TestReasons(t *testing.T) {
	tests := []struct {
		name string
		cfg  resilience.Config
		prep func(g *resilience.Guard)
		want Reason
	}{
		{"short-circuited", resilience.Config{}, func(g *resilience.Guard) { g.ForceBreaker(resilience.ForceOpen) }, ReasonShortCircuited},
		{"rejected", resilience.Config{Bulkhead: resilience.BulkheadConfig{MaxConcurrent: 1}}, nil, ReasonRejected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, map[string]resilience.Config{"coupon": tc.cfg})
			g := r.agg.downstreams[2].Guard()
			if tc.prep != nil {
				tc.prep(g)
			}
			if tc.want == ReasonRejected {
				// Occupy the only slot with a call that waits for us.
				release, held := make(chan struct{}), make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					resilience.Do(context.Background(), g, func(context.Context) (int, error) { close(held); <-release; return 0, nil })
				}()
				<-held
				defer func() { close(release); <-done }()
			}
			p, err := r.get(t, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if c := section(p, "coupons"); c.Reason != tc.want {
				t.Fatalf("reason %s, want %s", c.Reason, tc.want)
			}
		})
	}
}

func TestLastGoodServedWithAge(t *testing.T) {
	r := newRig(t, nil)
	if _, err := r.get(t, time.Second); err != nil { // all live: remembered
		t.Fatal(err)
	}
	livedAt := r.now
	r.now = r.now.Add(30 * time.Second)
	r.f.inventory, r.f.logistics = broken, broken
	p, err := r.get(t, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	inv := section(p, "inventory")
	if inv.Source != SourceCache || !inv.Degraded || inv.Reason != ReasonFailure || !inv.AsOf.Equal(livedAt) {
		t.Fatalf("inventory %+v", inv)
	}
	if *inv.Body.(Inventory).Items[0].Available != 3 {
		t.Fatalf("cached body %+v", inv.Body)
	}
	// Past the inventory's max age (1 min) it is no longer served; logistics
	// (30 min) still is.
	r.now = livedAt.Add(2 * time.Minute)
	p, err = r.get(t, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s := section(p, "inventory").Source; s != SourceFallback {
		t.Fatalf("stale inventory served from %s", s)
	}
	if s := section(p, "logistics").Source; s != SourceCache {
		t.Fatalf("logistics from %s", s)
	}
}

func TestCorruptLastGoodIsAMiss(t *testing.T) {
	r := newRig(t, nil)
	r.store.Put("coupons", "o-1", CacheEntry{AsOf: r.now, Payload: []byte(`{"items":"not a list"}`)}, time.Hour)
	r.f.coupon = broken
	p, err := r.get(t, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s := section(p, "coupons").Source; s != SourceFallback {
		t.Fatalf("corrupt entry served from %s", s)
	}
}

func TestOrderNotFound(t *testing.T) {
	r := newRig(t, nil)
	started, cancelled := make(chan struct{}), make(chan struct{})
	r.f.logistics = func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		close(cancelled)
		return ctx.Err()
	}
	r.f.order = func(ctx context.Context) error { <-started; return missing(ctx) }
	_, err := r.get(t, time.Minute)
	if !errors.Is(err, ErrOrderNotFound) {
		t.Fatalf("err %v", err)
	}
	select {
	case <-cancelled: // the siblings were cancelled and waited for, not left to their budgets
	default:
		t.Fatal("Get returned before cancelling the other sections")
	}
	if r.store.gets != 0 {
		t.Fatal("a 404 looked for a last-good order")
	}
}

func TestOrderUnavailable(t *testing.T) {
	r := newRig(t, nil)
	r.f.order = broken
	if _, err := r.get(t, time.Second); !errors.Is(err, ErrOrderUnavailable) {
		t.Fatalf("err %v", err)
	}
	// With a last-good order the page is served from it.
	r.f.order = healthy
	if _, err := r.get(t, time.Second); err != nil {
		t.Fatal(err)
	}
	r.f.order = broken
	p, err := r.get(t, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if o := section(p, "order"); o.Source != SourceCache || o.Body.(Order).ID != "o-1" {
		t.Fatalf("order %+v", o)
	}
}

// fallbackCounter counts the fallbacks each dependency's guard reports.
type fallbackCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *fallbackCounter) OnEvent(_ context.Context, e resilience.Event) {
	if e.Fallback {
		c.mu.Lock()
		c.n[e.Dependency]++
		c.mu.Unlock()
	}
}

func (c *fallbackCounter) OnStateChange(resilience.StateChange)     {}
func (c *fallbackCounter) OnTimeoutChange(resilience.TimeoutChange) {}

// TestAbandonedPageSkipsFallbacks: once the order has failed with nothing
// cached, the page is a 503 and the other sections are stopped; none of
// them then looks for a last-good copy it could only throw away.
func TestAbandonedPageSkipsFallbacks(t *testing.T) {
	fc := &fallbackCounter{n: map[string]int{}}
	r := newRig(t, nil, resilience.WithListener(fc))
	r.f.order = broken
	r.f.inventory, r.f.coupon, r.f.logistics = hung, hung, hung
	if _, err := r.get(t, time.Minute); !errors.Is(err, ErrOrderUnavailable) {
		t.Fatalf("err %v, want ErrOrderUnavailable", err)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.n["order"] != 1 {
		t.Errorf("order fallbacks %d, want 1: the order looks for its last good copy", fc.n["order"])
	}
	for _, dep := range []string{"inventory", "coupon", "logistics"} {
		if fc.n[dep] != 0 {
			t.Errorf("%s fell back %d times on an abandoned page", dep, fc.n[dep])
		}
	}
}

// TestOrderNotFoundCountsNoFallback: for an order that does not exist
// every service answers 404, and a section's 404 may come before the
// order's. The page is a 404 all the same: no section looks for a last-good
// copy, so no fallback is counted against a dependency that answered.
func TestOrderNotFoundCountsNoFallback(t *testing.T) {
	fc := &fallbackCounter{n: map[string]int{}}
	r := newRig(t, nil, resilience.WithListener(fc))
	for range 20 {
		var answered sync.WaitGroup
		answered.Add(3)
		section := func(ctx context.Context) error { defer answered.Done(); return missing(ctx) }
		r.f.inventory, r.f.coupon, r.f.logistics = section, section, section
		r.f.order = func(ctx context.Context) error { answered.Wait(); return missing(ctx) }
		if _, err := r.get(t, time.Minute); !errors.Is(err, ErrOrderNotFound) {
			t.Fatalf("err %v, want ErrOrderNotFound", err)
		}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if len(fc.n) != 0 || r.store.gets != 0 {
		t.Errorf("fallbacks %v and %d last-good reads for pages of an order that does not exist", fc.n, r.store.gets)
	}
}

// TestSectionNotFoundFallsBack: a section's 404 for an order that exists is
// that section's failure to answer: the page shows its last good answer.
func TestSectionNotFoundFallsBack(t *testing.T) {
	r := newRig(t, nil)
	if _, err := r.get(t, time.Second); err != nil {
		t.Fatal(err)
	}
	r.f.coupon = missing
	p, err := r.get(t, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s := section(p, "coupons"); s.Source != SourceCache {
		t.Fatalf("coupons after a 404 from %s (%s), want its last good answer", s.Source, s.Reason)
	}
}

func TestCacheFailureDegradesToDefault(t *testing.T) {
	r := newRig(t, nil)
	r.store.getErr = errors.New("redis: connection refused")
	r.f.coupon = broken
	p, err := r.get(t, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s := section(p, "coupons").Source; s != SourceFallback {
		t.Fatalf("coupons from %s", s)
	}
}

func TestCallsRunInParallel(t *testing.T) {
	// Each downstream waits until all four have started: sequential calls
	// would never get there and would time out instead.
	r := newRig(t, nil)
	var started sync.WaitGroup
	started.Add(4)
	all := make(chan struct{})
	go func() { started.Wait(); close(all) }()
	barrier := func(ctx context.Context) error {
		started.Done()
		select {
		case <-all:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.f.order, r.f.inventory, r.f.coupon, r.f.logistics = barrier, barrier, barrier, barrier
	p, err := r.get(t, 5*time.Second)
	if err != nil || p.Degraded {
		t.Fatalf("err %v degraded %v", err, p != nil && p.Degraded)
	}
}

func TestEverythingHungStaysInsideDeadline(t *testing.T) {
	r := newRig(t, map[string]resilience.Config{"order": {Timeout: time.Hour}})
	// Every call the page makes must end by the page's deadline less the
	// reserve, the order's hour-long sub-budget notwithstanding, and Get
	// must return once they are cut off. The bound is read from each call's
	// context, not from a clock: a loaded machine changes when a deadline
	// fires, not what it is.
	var mu sync.Mutex
	deadlines := map[string]time.Time{}
	hungRecording := func(name string) behaviour {
		return func(ctx context.Context) error {
			dl, _ := ctx.Deadline() // zero if none: caught below
			mu.Lock()
			deadlines[name] = dl
			mu.Unlock()
			<-ctx.Done()
			return ctx.Err()
		}
	}
	r.f.order, r.f.inventory, r.f.coupon, r.f.logistics = hungRecording("order"), hungRecording("inventory"), hungRecording("coupon"), hungRecording("logistics")

	const deadline = 400 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	page, _ := ctx.Deadline()
	done := make(chan error, 1)
	go func() {
		_, err := r.agg.Get(ctx, "o-1")
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute): // only a hang gets here: the bound is the order's hour
		t.Fatalf("Get still waiting a minute after its %v deadline", deadline)
	}
	if !errors.Is(err, ErrOrderUnavailable) {
		t.Fatalf("err %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := deadlines["order"]; !ok {
		t.Fatal("the order was never called")
	}
	// The others run beside the order; one not yet started when the order
	// failed is never called, which is fine.
	want := page.Add(-r.agg.cfg.Reserve)
	for name, dl := range deadlines {
		if dl.IsZero() || dl.After(want) {
			t.Errorf("%s called with deadline %v, want by %v (the page's deadline less the reserve)", name, dl, want)
		}
	}
}

// TestReserveCutIsTheCallersDeadline: a call still running when only the
// reserve is left is cut there, for the page's sake, not because the
// dependency broke its sub-budget. The section says DEADLINE and serves its
// last good copy; the dependency's guard counts no timeout.
func TestReserveCutIsTheCallersDeadline(t *testing.T) {
	r := newRig(t, map[string]resilience.Config{"logistics": {Timeout: time.Hour}})
	if _, err := r.get(t, time.Second); err != nil { // remembers a live copy
		t.Fatal(err)
	}
	r.f.logistics = hung
	p, err := r.get(t, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	s := section(p, "logistics")
	if s.Source != SourceCache || s.Reason != ReasonDeadline {
		t.Fatalf("logistics from %s, reason %q; want its cached copy, DEADLINE", s.Source, s.Reason)
	}
	var g *resilience.Guard
	for _, d := range r.agg.downstreams {
		if d.Name() == "logistics" {
			g = d.Guard()
		}
	}
	if c := g.Snapshot().Counts; c["timeout"] != 0 || c["failure"] != 0 {
		t.Errorf("logistics counts %v: the cut is not the dependency's timeout", c)
	}
}

// BenchmarkGet measures the aggregation's own cost per page — four guarded
// calls in parallel, assembly and the last-good hand-off — with instant fakes
// in place of the HTTP clients.
func BenchmarkGet(b *testing.B) {
	r := newRig(b, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		if _, err := r.agg.Get(cctx, "o-1"); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}
