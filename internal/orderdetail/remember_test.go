package orderdetail

import (
	"context"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

type requestKey struct{}

// TestWritesCarryTheRequest: every live section is handed to the store with
// the request's context, so the write can be linked to the request's trace.
func TestWritesCarryTheRequest(t *testing.T) {
	r := newRig(t, nil)
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), requestKey{}, "req-1"), time.Second)
	defer cancel()
	if _, err := r.agg.Get(ctx, "o-1"); err != nil {
		t.Fatal(err)
	}
	r.store.mu.Lock()
	defer r.store.mu.Unlock()
	if len(r.store.putCtx) != 4 {
		t.Fatalf("%d writes, want one per section", len(r.store.putCtx))
	}
	for i, c := range r.store.putCtx {
		if c.Value(requestKey{}) != "req-1" {
			t.Errorf("write %d was handed a context without the request's values", i)
		}
	}
}

// TestUnchangedSectionsAreNotRewritten: with a rewrite interval, a section
// whose answer has not changed is written again only once its copy is a
// quarter of its max age old, however often its order is served.
func TestUnchangedSectionsAreNotRewritten(t *testing.T) {
	f := &fakes{order: healthy, inventory: healthy, coupon: healthy, logistics: healthy}
	store := newFakeStore()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	g := func(name string) *resilience.Guard {
		g, err := resilience.New(name, resilience.Config{Retry: resilience.RetryConfig{MaxAttempts: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	agg, err := New(Config{
		Core: NewCore(g("order"), 24*time.Hour, f.GetOrder),
		Sections: []Downstream{
			NewSection("inventory", g("inventory"), time.Minute, f.GetInventory, UnknownInventory),
			NewSection("coupons", g("coupon"), 5*time.Minute, f.GetCoupons, NoCoupons),
			NewSection("logistics", g("logistics"), 30*time.Minute, f.GetLogistics, UnknownLogistics),
		},
		Store: store, CacheGuard: g("cache"), Reserve: 10 * time.Millisecond,
		Now:             func() time.Time { return now },
		RewriteInterval: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agg.Close)
	writes := func() int {
		store.mu.Lock()
		defer store.mu.Unlock()
		return len(store.putCtx)
	}
	steps := []struct {
		at   time.Duration
		want int // writes so far
	}{
		{0, 4},                // every section's first copy
		{5 * time.Second, 4},  // inside the interval
		{11 * time.Second, 4}, // due, but unchanged and young
		{16 * time.Second, 4}, // not due: checked at +11 s
		{21 * time.Second, 5}, // inventory's copy is 21 s old: over 1 min / 4
		{76 * time.Second, 9}, // inventory again (55 s old); coupons, logistics and the order (76 s: over the 1 min cap)
	}
	t0 := now
	for _, s := range steps {
		now = t0.Add(s.at)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := agg.Get(ctx, "o-1")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got := writes(); got != s.want {
			t.Fatalf("+%v: %d writes, want %d", s.at, got, s.want)
		}
	}
}
