package orderdetail

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// lookups records the Observer's last-good lookups.
type lookups struct {
	mu  sync.Mutex
	got []string
}

func (l *lookups) CacheLookup(_ context.Context, dep, outcome string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, dep+"="+outcome)
}

// of lists the outcomes reported for dep, in order.
func (l *lookups) of(dep string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, g := range l.got {
		if d, outcome, _ := strings.Cut(g, "="); d == dep {
			out = append(out, outcome)
		}
	}
	return fmt.Sprint(out)
}

// corruptStore answers every read with the store's own ErrCacheCorrupt.
type corruptStore struct{ *fakeStore }

func (corruptStore) Get(context.Context, string, string) (CacheEntry, error) {
	return CacheEntry{}, ErrCacheCorrupt
}

// TestCachedPayloadsAreChecked: a payload the dependency's CacheDecoder
// refuses, or the store's own ErrCacheCorrupt, is a miss reported as
// "corrupt"; the section falls back to its default and the order to a 503.
func TestCachedPayloadsAreChecked(t *testing.T) {
	errEdited := errors.New("edited")
	// The coupon decoder refuses a negative discount, as the real one does.
	checkCoupons := func(payload []byte, id string) (Coupons, error) {
		c, err := unmarshalAs[Coupons](payload, id)
		for _, cp := range c.Items {
			if cp.DiscountCents < 0 {
				return Coupons{}, errEdited
			}
		}
		return c, err
	}
	newAgg := func(t *testing.T, store LastGood, obs Observer) (*Aggregator, *fakes) {
		f := &fakes{order: broken, inventory: healthy, coupon: broken, logistics: healthy}
		g := func(name string) *resilience.Guard {
			// Budgets of a minute, like the page's: the test is about what
			// a cached payload may be, and a stalled process must not turn
			// a read into a timeout (the default fallback budget is 80 ms).
			g, err := resilience.New(name, resilience.Config{Timeout: time.Minute, FallbackTimeout: time.Minute, Retry: resilience.RetryConfig{MaxAttempts: 1}})
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		agg, err := New(Config{
			Core: newCore(g("order"), time.Hour, f.GetOrder),
			Sections: []*Downstream{
				newSection("inventory", g("inventory"), time.Hour, f.GetInventory, UnknownInventory),
				newSection("coupons", g("coupon"), time.Hour, f.GetCoupons, NoCoupons, checkCoupons),
				newSection("logistics", g("logistics"), time.Hour, f.GetLogistics, UnknownLogistics),
			},
			Store: store, CacheGuard: g("cache"), Reserve: 10 * time.Millisecond, Observer: obs,
		})
		if err != nil {
			t.Fatal(err)
		}
		return agg, f
	}
	now := time.Now()
	entry := func(json string) CacheEntry { return CacheEntry{AsOf: now, Payload: []byte(json)} }
	goodOrder := `{"id":"o-1","items":[{"sku":"A","quantity":1}]}`

	tests := []struct {
		name     string
		order    string // the cached order's payload
		coupons  string // the cached coupons' payload
		wantErr  error  // of the page
		wantCoup Source // of the coupons section when there is a page
		// The lookups reported for the order and the coupons (those of a
		// refused page's coupons depend on when they were cancelled).
		wantOrder, wantCoupons string
	}{
		{"both good", goodOrder, `{"items":[{"code":"C","discount_cents":5}]}`, nil, SourceCache, "[hit]", "[hit]"},
		{"coupons refused by their decoder", goodOrder, `{"items":[{"code":"C","discount_cents":-5}]}`, nil, SourceFallback, "[hit]", "[corrupt]"},
		{"coupons not JSON", goodOrder, `{"items":`, nil, SourceFallback, "[hit]", "[corrupt]"},
		{"order of another id", `{"id":"o-2"}`, `{"items":[]}`, ErrOrderUnavailable, "", "[corrupt]", ""},
		{"order not an order", `[1,2]`, `{"items":[]}`, ErrOrderUnavailable, "", "[corrupt]", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := newFakeStore()
			store.Put("order", "o-1", entry(tc.order), time.Hour)
			store.Put("coupons", "o-1", entry(tc.coupons), time.Hour)
			obs := &lookups{}
			agg, _ := newAgg(t, store, obs)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p, err := agg.Get(ctx, "o-1")
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if err == nil {
				c := section(p, "coupons")
				if c.Source != tc.wantCoup {
					t.Fatalf("coupons from %s, want %s", c.Source, tc.wantCoup)
				}
				if c.Source == SourceFallback && (c.Body.(Coupons).Items == nil || len(c.Body.(Coupons).Items) != 0) {
					t.Fatalf("coupons default %+v", c.Body)
				}
			}
			if got := obs.of("order"); got != tc.wantOrder {
				t.Fatalf("order lookups %s, want %s", got, tc.wantOrder)
			}
			if got := obs.of("coupon"); tc.wantCoupons != "" && got != tc.wantCoupons {
				t.Fatalf("coupon lookups %s, want %s", got, tc.wantCoupons)
			}
		})
	}

	t.Run("store says corrupt", func(t *testing.T) {
		obs := &lookups{}
		agg, _ := newAgg(t, corruptStore{newFakeStore()}, obs)
		if _, err := agg.Get(context.Background(), "o-1"); !errors.Is(err, ErrOrderUnavailable) {
			t.Fatalf("err %v", err)
		}
		if got := obs.of("order"); got != "[corrupt]" {
			t.Fatalf("order lookups %s", got)
		}
	})
}
