package orderdetail

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// manualClock is the guards' clock: it moves only when told to, so the
// order's breaker stays open (or sleeps out) exactly when the test says.
// The guards in these tests never wait (one attempt); real time serves if
// one ever does.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *manualClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// WithDeadline ends the context as long after now in real time as d is
// after the clock's now.
func (c *manualClock) WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.Sub(c.Now()))
}

// TestNoFanOutForARefusedPage drives the order from healthy, through a run
// of failures that opens its breaker, a failed probe and a recovery, with no
// order ever cached, and counts the calls the other three dependencies
// receive for pages that can only be 503s.
func TestNoFanOutForARefusedPage(t *testing.T) {
	clk := &manualClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	r := newRig(t, nil, resilience.WithClock(clk))
	breaker := resilience.Config{}.WithDefaults().Breaker // the rig's order guard's
	trips := breaker.ConsecutiveFailures
	r.f.order = broken

	// Until the breaker opens every page calls the order live and, in
	// parallel, the others: the order failing is not yet known.
	refusedAt := -1
	for i := range trips + 1 {
		_, err := r.agg.Get(context.Background(), "o-1")
		if !errors.Is(err, ErrOrderUnavailable) {
			t.Fatalf("page %d: %v", i, err)
		}
		if errors.Is(err, resilience.ErrShortCircuited) {
			refusedAt = i
			break
		}
	}
	if refusedAt < 0 {
		t.Fatalf("the order's breaker did not open after %d failures", trips)
	}

	// From the first refusal on, a refused page calls nobody.
	orderCalls, otherCalls := r.f.orderCalls.Load(), r.f.otherCalls.Load()
	const pages = 100
	for i := range pages {
		_, err := r.agg.Get(context.Background(), "o-1")
		if !errors.Is(err, ErrOrderUnavailable) || !errors.Is(err, resilience.ErrShortCircuited) {
			t.Fatalf("refused page %d: %v", i, err)
		}
	}
	if n := r.f.otherCalls.Load() - otherCalls; n != 0 {
		t.Fatalf("%d calls to the other dependencies for %d refused pages (%.2f per page), want none", n, pages, float64(n)/pages)
	}
	if n := r.f.orderCalls.Load() - orderCalls; n != 0 {
		t.Fatalf("%d order calls while its breaker was open", n)
	}

	// A probe, when the sleep window is over, is the order's call alone:
	// it fails, and the others are still spared.
	clk.Advance(breaker.SleepWindow)
	if _, err := r.agg.Get(context.Background(), "o-1"); !errors.Is(err, ErrOrderUnavailable) || errors.Is(err, resilience.ErrShortCircuited) {
		t.Fatalf("probe page: %v, want the order's own failure", err)
	}
	if r.f.orderCalls.Load() != orderCalls+1 || r.f.otherCalls.Load() != otherCalls {
		t.Fatalf("probe page: %d order calls and %d others, want 1 and 0",
			r.f.orderCalls.Load()-orderCalls, r.f.otherCalls.Load()-otherCalls)
	}

	// The order heals: the next probe's page is served whole, and the page
	// after it calls all four at once again.
	r.f.order = healthy
	clk.Advance(breaker.SleepWindow)
	p, err := r.agg.Get(context.Background(), "o-1")
	if err != nil || p.Degraded {
		t.Fatalf("page after recovery: %v, degraded %v", err, p != nil && p.Degraded)
	}
	assertParallel(t, r)
}

// TestCachedOrderWhileRefused: with the order's breaker open, a cached
// order still makes a page, and its other sections are asked live.
func TestCachedOrderWhileRefused(t *testing.T) {
	r := newRig(t, nil)
	if _, err := r.get(t, time.Second); err != nil { // remembers every section
		t.Fatal(err)
	}
	r.agg.downstreams[0].Guard().ForceBreaker(resilience.ForceOpen)
	for i := range 3 { // the first teaches the gate, the others go through it
		others := r.f.otherCalls.Load()
		p, err := r.get(t, time.Second)
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		if o := section(p, "order"); o.Source != SourceCache || o.Reason != ReasonShortCircuited {
			t.Fatalf("page %d: order %+v", i, o)
		}
		for _, name := range []string{"inventory", "coupons", "logistics"} {
			if s := section(p, name); s.Source != SourceLive {
				t.Fatalf("page %d: %s from %s", i, name, s.Source)
			}
		}
		if n := r.f.otherCalls.Load() - others; n != 3 {
			t.Fatalf("page %d: %d calls to the others, want 3", i, n)
		}
	}
}

// TestSlowOrderKeepsTheOverlap: an order that times out (slow, not
// refused) leaves the others running beside it on the next page.
func TestSlowOrderKeepsTheOverlap(t *testing.T) {
	r := newRig(t, map[string]resilience.Config{"order": {Timeout: 20 * time.Millisecond}})
	r.f.order = hung
	_, err := r.get(t, time.Second)
	if !errors.Is(err, ErrOrderUnavailable) || !errors.Is(err, resilience.ErrTimeout) {
		t.Fatalf("err %v, want the order's timeout", err)
	}
	r.f.order = healthy
	assertParallel(t, r)
}

// assertParallel gets one page whose four calls each wait until all four
// have started: calls made one after another would never get there.
func assertParallel(t *testing.T, r *rig) {
	t.Helper()
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
	o, i, c, l := r.f.order, r.f.inventory, r.f.coupon, r.f.logistics
	defer func() { r.f.order, r.f.inventory, r.f.coupon, r.f.logistics = o, i, c, l }()
	r.f.order, r.f.inventory, r.f.coupon, r.f.logistics = barrier, barrier, barrier, barrier
	p, err := r.get(t, 5*time.Second)
	if err != nil || p.Degraded {
		t.Fatalf("calls not in parallel: err %v, degraded %v", err, p != nil && p.Degraded)
	}
}

func TestCoreGateSettle(t *testing.T) {
	shortCircuited := &resilience.Error{Dependency: "order", Kind: resilience.KindShortCircuited}
	steps := []struct {
		name string
		err  error
		want bool
	}{
		{"live answer", nil, false},
		{"failure", &resilience.Error{Dependency: "order", Kind: resilience.KindFailure, Err: errors.New("503")}, false},
		{"short-circuited", shortCircuited, true},
		{"timeout of a probe", &resilience.Error{Dependency: "order", Kind: resilience.KindTimeout}, true},
		{"rejected", &resilience.Error{Dependency: "order", Kind: resilience.KindRejected}, true},
		{"404", &resilience.Error{Dependency: "order", Kind: resilience.KindBadRequest, Err: resilience.BadRequest(ErrNotFound)}, false},
		{"short-circuited again", shortCircuited, true},
		{"live answer", nil, false},
	}
	var g coreGate
	for _, s := range steps {
		g.settle(s.err)
		if got := g.Load(); got != s.want {
			t.Fatalf("after %s: coreFirst %v, want %v", s.name, got, s.want)
		}
	}
}
