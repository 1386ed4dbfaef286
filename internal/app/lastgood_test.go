package app

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestEditedLastGoodIsNotServed edits the last-good entries of one order in
// Redis, one at a time, with every downstream failing, and checks that an
// entry no live answer could have been is a cache miss counted as corrupt:
// the section gets its semantic default, and the order a 503. Untouched
// entries, the control rows, are served.
func TestEditedLastGoodIsNotServed(t *testing.T) {
	rd := miniredis.RunT(t)
	// Each case reads Redis, not what the near cache kept from the case
	// before: the clock moves past its TTL between cases.
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	s, _ := startServiceEnv(t, []string{"--redis-url", patientRedisURL(rd.Addr())}, patientCache,
		func(e *Env) { e.NearClock = func() time.Time { return time.Unix(0, clock.Load()) } })
	const id = "o-5"
	s.getLive("/v1/orders/" + id)
	key := func(section string) string { return "orderagg:v1:lastgood:" + section + ":" + id }
	sections := []string{"order", "inventory", "coupons", "logistics"}
	waitUntil(t, func() bool {
		for _, sec := range sections {
			if !rd.Exists(key(sec)) {
				return false
			}
		}
		return true
	})
	saved := map[string]map[string]string{}
	for _, sec := range sections {
		saved[sec] = map[string]string{}
		fields, err := rd.HKeys(key(sec))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			saved[sec][f] = rd.HGet(key(sec), f)
		}
	}
	restore := func() {
		for _, sec := range sections {
			rd.Del(key(sec))
			for f, v := range saved[sec] {
				rd.HSet(key(sec), f, v)
			}
		}
	}
	for _, svc := range []string{"order", "inventory", "coupon", "logistics"} {
		s.fault(svc, `{"error_rate":1}`)
	}

	// edit changes one field of a payload.
	edit := func(change func(m map[string]any)) func(string) string {
		return func(val string) string {
			var m map[string]any
			if err := json.Unmarshal([]byte(val), &m); err != nil {
				t.Fatalf("stored payload %q: %v", val, err)
			}
			change(m)
			b, _ := json.Marshal(m)
			return string(b)
		}
	}
	item := func(m map[string]any, list string) map[string]any {
		items, _ := m[list].([]any)
		if len(items) == 0 {
			t.Fatalf("no %s in %v", list, m)
		}
		return items[0].(map[string]any)
	}
	tests := []struct {
		name    string
		section string // its key and page name
		guard   string // its metrics label
		val     func(string) string
		wrong   bool // replace the hash by a string
		served  bool
	}{
		{"order untouched", "order", "order", nil, false, true},
		{"order of another id", "order", "order", edit(func(m map[string]any) { m["id"] = "o-6" }), false, false},
		{"order total_cents -5", "order", "order", edit(func(m map[string]any) { m["total_cents"] = -5 }), false, false},
		{"order item quantity 0", "order", "order", edit(func(m map[string]any) { item(m, "items")["quantity"] = 0 }), false, false},
		{"order without currency", "order", "order", edit(func(m map[string]any) { delete(m, "currency") }), false, false},
		{"inventory untouched", "inventory", "inventory", nil, false, true},
		{"inventory available -1", "inventory", "inventory", edit(func(m map[string]any) { item(m, "items")["available"] = -1 }), false, false},
		{"inventory status against its count", "inventory", "inventory", edit(func(m map[string]any) {
			it := item(m, "items")
			it["available"], it["status"] = 0, "IN_STOCK"
		}), false, false},
		{"inventory available unknown", "inventory", "inventory", edit(func(m map[string]any) { item(m, "items")["available"] = nil }), false, false},
		{"coupons untouched", "coupons", "coupon", nil, false, true},
		{"coupons discount -5", "coupons", "coupon", edit(func(m map[string]any) {
			m["items"] = []any{map[string]any{"code": "X", "description": "", "discount_cents": -5, "expires_at": "2030-01-01T00:00:00Z"}}
		}), false, false},
		{"coupons list null", "coupons", "coupon", edit(func(m map[string]any) { m["items"] = nil }), false, false},
		{"logistics untouched", "logistics", "logistics", nil, false, true},
		{"logistics status not a token", "logistics", "logistics", edit(func(m map[string]any) { m["status"] = "in transit" }), false, false},
		{"logistics not JSON", "logistics", "logistics", func(string) string { return `{"status":` }, false, false},
		{"logistics not a hash", "logistics", "logistics", nil, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			restore()
			clock.Add(int64(time.Hour))
			switch {
			case tc.wrong:
				rd.Del(key(tc.section))
				if err := rd.Set(key(tc.section), "x"); err != nil {
					t.Fatal(err)
				}
			case tc.val != nil:
				rd.HSet(key(tc.section), "val", tc.val(saved[tc.section]["val"]))
			}
			before := corruptMisses(t, s, tc.guard)
			a := s.get("/v1/orders/" + id)
			got := corruptMisses(t, s, tc.guard) - before

			if tc.section == "order" {
				switch {
				case tc.served && (a.status != http.StatusOK || sec(a, "order")["source"] != "cache"):
					t.Fatalf("untouched order not served from the cache: %d %v", a.status, a.body)
				case !tc.served && (a.status != http.StatusServiceUnavailable || errCode(a) != "ORDER_UNAVAILABLE"):
					t.Fatalf("edited order: %d %v, want 503 ORDER_UNAVAILABLE", a.status, a.body)
				}
			} else {
				if a.status != http.StatusOK {
					t.Fatalf("page: %d %v", a.status, a.body)
				}
				want := "cache"
				if !tc.served {
					want = "fallback"
				}
				if got := sec(a, tc.section); got["source"] != want {
					t.Fatalf("%s: %v, want source %s", tc.section, got, want)
				}
			}
			if want := map[bool]float64{true: 0, false: 1}[tc.served]; got != want {
				t.Fatalf("cache_miss{reason=corrupt} of %s rose by %v, want %v", tc.guard, got, want)
			}
		})
	}
}

// corruptMisses reads orderagg_dependency_events_total{event="cache_miss",
// reason="corrupt"} of dep.
func corruptMisses(t *testing.T, s *service, dep string) float64 {
	t.Helper()
	want := `orderagg_dependency_events_total{dependency="` + dep + `",event="cache_miss",reason="corrupt"} `
	for _, line := range strings.Split(s.metricsText(), "\n") {
		if v, ok := strings.CutPrefix(line, want); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", want)
	return 0
}
