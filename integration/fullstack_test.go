package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The full stack (service, sim and Redis containers on a private network)
// with the default settings: a healthy page; each secondary dependency
// failing, hanging or answering garbage, with the section shape the contract
// gives each; the order service failing with and without a cached copy; an
// order that does not exist.
func TestFullStackFaults(t *testing.T) {
	requireImages(t, images().Service, images().Redis)
	nw := newNetwork(t)
	_, redisAddr := startRedis(t, nw)
	_, simURL := startSim(t, nw)
	_, base := startService(t, nw, nil)

	// Each case uses ids no other case has used, so no last-good copy
	// exists and a failed section must fall back to its semantic default.
	var seq int
	freshID := func() string { seq++; return fmt.Sprintf("o-fs%03d", seq) }

	t.Run("healthy", func(t *testing.T) {
		a := order(t, base, freshID())
		requireHealthy(t, a)
		if a.Header.Get("Cache-Control") == "no-store" {
			t.Errorf("%v: Cache-Control no-store on a healthy page", a)
		}
		t.Logf("healthy page in %s", ms(a.Latency))
	})

	// Faults of the secondary dependencies. The default breaker needs 20
	// calls in its window before it may open; these cases make at most 2
	// calls per dependency (one retry on failure), so every answer shows the
	// fault itself, not a short circuit.
	faults := []struct{ name, body, reason string }{
		{"error", `{"error_rate":1,"error_status":503}`, "FAILURE"},
		{"hang", `{"hang":true}`, "TIMEOUT"},
		{"corrupt", `{"corrupt":true}`, "FAILURE"},
	}
	subBudget := map[string]time.Duration{depInventory: 600 * time.Millisecond, depCoupon: 300 * time.Millisecond, depLogistics: 500 * time.Millisecond}
	for _, dep := range []string{depInventory, depCoupon, depLogistics} {
		for _, f := range faults {
			t.Run(dep+"_"+f.name, func(t *testing.T) {
				t.Cleanup(func() { clearFaults(t, simURL) })
				setFault(t, simURL, dep, f.body)
				a := order(t, base, freshID())
				requireSection(t, a, dep, "fallback", f.reason)
				requireFallbackShape(t, a, dep)
				for other, s := range a.Page.sections() {
					if other != dep && s.Source != "live" {
						t.Errorf("%v: section %s is %s, want live (only %s is faulty)", a, other, s.Source, dep)
					}
				}
				if f.reason == "TIMEOUT" {
					// Cut at the sub-budget: not before it, not long after.
					if a.Latency < subBudget[dep] || a.Latency > subBudget[dep]+400*time.Millisecond {
						t.Errorf("%v: a %s hang should end the page at its %v sub-budget", a, dep, subBudget[dep])
					}
				}
				t.Logf("%s %s: %s/%s in %s", dep, f.name, a.Page.sections()[dep].Source, f.reason, ms(a.Latency))
			})
		}
	}

	t.Run("order_down_cached", func(t *testing.T) {
		t.Cleanup(func() { clearFaults(t, simURL) })
		id := freshID()
		live := order(t, base, id)
		requireHealthy(t, live)
		// The last-good copy is written after the answer: wait for it.
		waitForKeys(t, redisAddr, lastGoodKey(depOrder, id))

		setFault(t, simURL, depOrder, `{"error_rate":1}`)
		a := order(t, base, id)
		s := requireSection(t, a, depOrder, "cache", "FAILURE")
		if !bytes.Equal(compactJSON(t, s.Data), compactJSON(t, live.Page.Order.Data)) {
			t.Errorf("cached order data differs from the live one:\n cached %s\n live   %s", s.Data, live.Page.Order.Data)
		}
		asOf, _ := time.Parse(time.RFC3339, s.AsOf)
		if age := time.Since(asOf); age < -time.Second || age > time.Minute {
			t.Errorf("cached order as_of %s is %v old, want the time of the live answer seconds ago", s.AsOf, age)
		}
		// The other sections are still live: only the order is down.
		for _, dep := range []string{depInventory, depCoupon, depLogistics} {
			requireSection(t, a, dep, "live", "")
		}
		t.Logf("order down, cached: 200 with order from cache (as_of %s) in %s", s.AsOf, ms(a.Latency))
	})

	t.Run("order_down_never_seen", func(t *testing.T) {
		t.Cleanup(func() { clearFaults(t, simURL) })
		setFault(t, simURL, depOrder, `{"error_rate":1}`)
		id := freshID()
		a := order(t, base, id)
		if a.Status != http.StatusServiceUnavailable || a.ErrCode != "ORDER_UNAVAILABLE" {
			t.Fatalf("%v: want 503 ORDER_UNAVAILABLE for an order never seen while the order service is down", a)
		}
		if ra := a.Header.Get("Retry-After"); ra == "" {
			t.Errorf("%v: 503 without Retry-After", a)
		}
		// Nothing was cached for it.
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
		t.Cleanup(func() { _ = rdb.Close() })
		if n, err := rdb.Exists(t.Context(), lastGoodKey(depOrder, id)).Result(); err != nil || n != 0 {
			t.Errorf("EXISTS %s = %d, %v; want 0", lastGoodKey(depOrder, id), n, err)
		}
		t.Logf("order down, never seen: 503 ORDER_UNAVAILABLE (Retry-After %s) in %s", a.Header.Get("Retry-After"), ms(a.Latency))
	})

	t.Run("order_not_found", func(t *testing.T) {
		a := order(t, base, "nf-fs001")
		if a.Status != http.StatusNotFound || a.ErrCode != "ORDER_NOT_FOUND" {
			t.Fatalf("%v: want 404 ORDER_NOT_FOUND", a)
		}
	})
}

// compactJSON normalises a JSON document for comparison.
func compactJSON(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %s: %v", b, err)
	}
	return buf.Bytes()
}
