package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/cache"
	"github.com/orderagg/orderagg/internal/resilience"
)

// TestEventsCountedSeparately scripts the events of four dependencies and
// checks that each kind lands in its own series, by dependency: a timeout is
// never a failure, a rejection never a short circuit.
func TestEventsCountedSeparately(t *testing.T) {
	h := newHarness(t)
	l := h.tel.Listener()
	obs := h.tel.Listener()
	ctx := context.Background()
	at := time.Now()
	ev := func(dep string, k resilience.Kind, attempt int, d time.Duration) resilience.Event {
		return resilience.Event{Dependency: dep, Kind: k, Attempt: attempt, Start: at, Duration: d}
	}
	boom := errors.New("boom")

	// order: one success.
	l.OnEvent(ctx, ev("order", resilience.KindSuccess, 1, 12*time.Millisecond))
	// inventory: a failure, retried to a success; then a timeout, its
	// fallback served from cache.
	e := ev("inventory", resilience.KindFailure, 1, 250*time.Millisecond)
	e.Err = boom
	l.OnEvent(ctx, e)
	l.OnEvent(ctx, ev("inventory", resilience.KindSuccess, 2, 5*time.Millisecond))
	l.OnEvent(ctx, ev("inventory", resilience.KindTimeout, 1, 300*time.Millisecond))
	obs.CacheLookup(ctx, "inventory", "hit")
	l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: resilience.KindSuccess, Fallback: true, Start: at})
	// coupon: rejected, short-circuited, a retry cut by the deadline, a bad
	// request; fallbacks
	// that found nothing.
	l.OnEvent(ctx, ev("coupon", resilience.KindRejected, 0, 0))
	l.OnEvent(ctx, ev("coupon", resilience.KindShortCircuited, 0, 0))
	l.OnEvent(ctx, ev("coupon", resilience.KindSuccess, 1, 40*time.Millisecond))
	l.OnEvent(ctx, ev("coupon", resilience.KindDeadline, 2, 20*time.Millisecond))
	l.OnEvent(ctx, ev("coupon", resilience.KindBadRequest, 1, time.Millisecond))
	for _, outcome := range []string{"absent", "stale", "corrupt", "error"} {
		obs.CacheLookup(ctx, "coupon", outcome)
	}
	l.OnEvent(ctx, resilience.Event{Dependency: "coupon", Kind: resilience.KindFailure, Fallback: true, Start: at, Err: boom})
	// logistics: no budget left.
	l.OnEvent(ctx, ev("logistics", resilience.KindDeadline, 0, 0))

	fams := scrape(t, h.tel)
	events := "orderagg_dependency_events_total"
	want := []struct {
		dep, event, reason string
		n                  float64
	}{
		{"order", "success", "", 1},
		{"inventory", "failure", "", 1},
		{"inventory", "success", "", 1},
		{"inventory", "timeout", "", 1},
		{"inventory", "cache_hit", "", 1},
		{"inventory", "fallback_success", "", 1},
		{"coupon", "rejected", "", 1},
		{"coupon", "short_circuited", "", 1},
		{"coupon", "success", "", 1},
		{"coupon", "deadline", "", 1},
		{"coupon", "bad_request", "", 1},
		{"coupon", "cache_miss", "absent", 1},
		{"coupon", "cache_miss", "stale", 1},
		{"coupon", "cache_miss", "corrupt", 1},
		{"coupon", "cache_miss", "error", 1},
		{"coupon", "fallback_failure", "", 1},
		{"logistics", "deadline", "", 1},
	}
	for _, w := range want {
		labels := map[string]string{"dependency": w.dep, "event": w.event}
		if w.reason != "" {
			labels["reason"] = w.reason
		}
		if got := mustSample(t, fams, events, labels); got != w.n {
			t.Errorf("%s%v = %v, want %v", events, labels, got, w.n)
		}
	}
	// The series above 0 are exactly those above.
	nonzero := 0
	for _, m := range fams[events].GetMetric() {
		if m.GetCounter().GetValue() != 0 {
			nonzero++
		}
	}
	if nonzero != len(want) {
		t.Errorf("%s has %d series above 0, want %d (nothing lumped, nothing extra)", events, nonzero, len(want))
	}

	// Logical calls: one per first attempt or refusal, not per retry.
	for dep, n := range map[string]float64{"order": 1, "inventory": 2, "coupon": 4, "logistics": 1} {
		if got := mustSample(t, fams, "orderagg_dependency_calls_total", map[string]string{"dependency": dep}); got != n {
			t.Errorf("calls{%s} = %v, want %v", dep, got, n)
		}
	}

	// Physical attempts only in the histogram, by outcome; a 250 ms
	// attempt is above the 200 ms bucket and within the 300 ms one.
	hist := "orderagg_dependency_attempt_duration_seconds"
	if got := mustSample(t, fams, hist, map[string]string{"dependency": "inventory", "event": "failure"}); got != 1 {
		t.Errorf("%s{inventory,failure} count = %v, want 1", hist, got)
	}
	if _, ok := sample(fams, hist, map[string]string{"dependency": "coupon", "event": "rejected"}); ok {
		t.Errorf("%s has a series for a rejection, which made no attempt", hist)
	}
	for _, m := range fams[hist].GetMetric() {
		if m.GetLabel()[0].GetValue() != "inventory" || m.GetLabel()[1].GetValue() != "failure" {
			continue
		}
		for _, b := range m.Histogram.GetBucket() {
			inside := b.GetUpperBound() >= 0.3
			if got := b.GetCumulativeCount() == 1; got != inside {
				t.Errorf("bucket le=%v holds %d, want the 250ms attempt only from le=0.3", b.GetUpperBound(), b.GetCumulativeCount())
			}
		}
	}
}

// TestUnlistedEventsGetTheirOwnSeries: an event kind or miss reason this
// package has no prebuilt series for (one resilience or the aggregator may
// add later) is still counted, in a series of its own, and counted again on
// its next occurrence rather than started over.
func TestUnlistedEventsGetTheirOwnSeries(t *testing.T) {
	h := newHarness(t)
	l := h.tel.Listener()
	obs := h.tel.Listener()
	ctx := context.Background()
	unknown := resilience.Event{Dependency: "order", Kind: resilience.Kind(200), Attempt: 1, Start: time.Now()}
	l.OnEvent(ctx, unknown)
	l.OnEvent(ctx, unknown)
	obs.CacheLookup(ctx, "order", "evicted")

	fams := scrape(t, h.tel)
	events := "orderagg_dependency_events_total"
	if got := mustSample(t, fams, events, map[string]string{"dependency": "order", "event": unknown.Name()}); got != 2 {
		t.Errorf("events{order,%s} = %v, want 2", unknown.Name(), got)
	}
	if got := mustSample(t, fams, events, map[string]string{"dependency": "order", "event": "cache_miss", "reason": "evicted"}); got != 1 {
		t.Errorf("events{order,cache_miss,evicted} = %v, want 1", got)
	}
	if got := mustSample(t, fams, "orderagg_dependency_calls_total", map[string]string{"dependency": "order"}); got != 2 {
		t.Errorf("calls{order} = %v, want 2", got)
	}
}

func TestRecordRequest(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.tel.RecordRequest(ctx, 200, false, 40*time.Millisecond)
	h.tel.RecordRequest(ctx, 200, true, 1200*time.Millisecond)
	h.tel.RecordRequest(ctx, 200, true, 900*time.Millisecond)
	h.tel.RecordRequest(ctx, 503, false, 3*time.Millisecond)

	fams := scrape(t, h.tel)
	for _, c := range []struct {
		status, degraded string
		n                float64
	}{{"200", "false", 1}, {"200", "true", 2}, {"503", "false", 1}} {
		labels := map[string]string{"status": c.status, "degraded": c.degraded}
		if got := mustSample(t, fams, "orderagg_http_requests_total", labels); got != c.n {
			t.Errorf("requests%v = %v, want %v", labels, got, c.n)
		}
		if got := mustSample(t, fams, "orderagg_http_request_duration_seconds", labels); got != c.n {
			t.Errorf("duration%v count = %v, want %v", labels, got, c.n)
		}
	}
}

func TestObserveGuards(t *testing.T) {
	h := newHarness(t)
	lis := h.tel.Listener()
	inv, err := resilience.New("inventory", resilience.Config{Timeout: 300 * time.Millisecond, Bulkhead: resilience.BulkheadConfig{MaxConcurrent: 7}}, resilience.WithListener(lis))
	if err != nil {
		t.Fatal(err)
	}
	logi, err := resilience.New("logistics", resilience.Config{}, resilience.WithListener(lis))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.tel.Observe(State{Guards: []*resilience.Guard{inv, logi}}); err != nil {
		t.Fatal(err)
	}
	logi.ForceBreaker(resilience.ForceOpen)

	// Hold a bulkhead slot while scraping, so in_use is seen at 1.
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := resilience.Do(context.Background(), inv, func(context.Context) (int, error) {
			close(started)
			<-release
			return 1, nil
		})
		done <- err
	}()
	<-started
	fams := scrape(t, h.tel)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	dep := func(d string) map[string]string { return map[string]string{"dependency": d} }
	checks := []struct {
		name, dep string
		want      float64
	}{
		{"orderagg_breaker_state", "inventory", 0},
		{"orderagg_breaker_state", "logistics", 3},
		{"orderagg_bulkhead_capacity", "inventory", 7},
		{"orderagg_bulkhead_capacity", "logistics", 50},
		{"orderagg_bulkhead_in_use", "inventory", 1},
		{"orderagg_dependency_timeout_seconds", "inventory", 0.3},
		{"orderagg_dependency_timeout_seconds", "logistics", 1},
		{"orderagg_dependency_recommended_timeout_seconds", "logistics", 0},
	}
	for _, c := range checks {
		if got := mustSample(t, fams, c.name, dep(c.dep)); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.dep, got, c.want)
		}
	}
	tr := map[string]string{"dependency": "logistics", "from": "CLOSED", "to": "FORCED_OPEN"}
	if got := mustSample(t, fams, "orderagg_breaker_transitions_total", tr); got != 1 {
		t.Errorf("transitions%v = %v, want 1", tr, got)
	}
}

// TestBreakerStateValues: orderagg_breaker_state's values are the runbook's.
func TestBreakerStateValues(t *testing.T) {
	for st, want := range map[resilience.State]float64{
		resilience.StateClosed: 0, resilience.StateOpen: 1, resilience.StateHalfOpen: 2,
		resilience.StateForcedOpen: 3, resilience.StateForcedClosed: 4,
	} {
		if float64(st) != want {
			t.Errorf("%v is %v, want %v", st, float64(st), want)
		}
	}
}

// TestCacheMetrics: the store's read and write outcomes, counted by
// outcome, and its write queue are read at scrape time.
func TestCacheMetrics(t *testing.T) {
	h := newHarness(t)
	st := cache.Stats{Hits: 10, Misses: 4, Corrupt: 1, ReadErrors: 2, WritesOK: 20, WritesStale: 3, WritesDropped: 5, WriteErrors: 6,
		Queued: 7, QueueCapacity: 1024}
	if err := h.tel.Observe(State{Cache: func() cache.Stats { return st }}); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, h.tel)
	for name, byOutcome := range map[string]map[string]float64{
		"orderagg_cache_reads_total":  {"hit": 10, "miss": 4, "corrupt": 1, "error": 2},
		"orderagg_cache_writes_total": {"ok": 20, "stale": 3, "dropped": 5, "error": 6},
	} {
		for outcome, want := range byOutcome {
			if got := mustSample(t, fams, name, map[string]string{"outcome": outcome}); got != want {
				t.Errorf("%s{outcome=%s} = %v, want %v", name, outcome, got, want)
			}
		}
	}
	if got := mustSample(t, fams, "orderagg_cache_write_queue", nil); got != 7 {
		t.Errorf("write queue = %v, want 7", got)
	}
}

func TestAdmissionMetrics(t *testing.T) {
	h := newHarness(t)
	if err := h.tel.Observe(State{Admission: func() (int, int) { return 96, 7 }}); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, h.tel)
	if got := mustSample(t, fams, "orderagg_admission_limit", nil); got != 96 {
		t.Errorf("limit = %v, want 96", got)
	}
	if got := mustSample(t, fams, "orderagg_admission_inflight", nil); got != 7 {
		t.Errorf("in flight = %v, want 7", got)
	}
	h.tel.RecordRejected(context.Background())
	h.tel.RecordRejected(context.Background())
	if got := mustSample(t, scrape(t, h.tel), "orderagg_admission_rejected_total", nil); got != 2 {
		t.Errorf("rejected = %v, want 2", got)
	}
}

func TestRuntimeMetrics(t *testing.T) {
	h := newHarness(t)
	fams := scrape(t, h.tel)
	if v := mustSample(t, fams, "go_goroutines", nil); v < 1 {
		t.Errorf("go_goroutines = %v", v)
	}
	if _, ok := fams["target_info"]; !ok {
		t.Error("no target_info: the resource (service.name) is not exported")
	}
}

// TestSeriesExistFromStart: before any traffic, every counter series the
// runbook's queries read exists with value 0: every dependency's events,
// calls and first breaker trip, every answer the order-detail handler
// writes and every cache outcome, so the first breaker trip, fallback or
// 503 is an increase from 0.
func TestSeriesExistFromStart(t *testing.T) {
	h := newHarness(t)
	deps := []string{"order", "inventory", "coupon", "logistics", "cache"}
	var guards []*resilience.Guard
	for _, name := range deps {
		g, err := resilience.New(name, resilience.Config{})
		if err != nil {
			t.Fatal(err)
		}
		guards = append(guards, g)
	}
	if err := h.tel.Observe(State{Guards: guards, Cache: func() cache.Stats { return cache.Stats{} }}); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, h.tel)
	zero := func(name string, labels map[string]string) {
		t.Helper()
		if v, ok := sample(fams, name, labels); !ok || v != 0 {
			t.Errorf("%s%v = %v (present %v), want 0 from start-up", name, labels, v, ok)
		}
	}
	zero("orderagg_admission_rejected_total", nil)
	for _, a := range [][2]string{{"200", "false"}, {"200", "true"}, {"400", "false"}, {"404", "false"}, {"500", "false"}, {"503", "false"}} {
		zero("orderagg_http_requests_total", map[string]string{"status": a[0], "degraded": a[1]})
	}
	for _, o := range []string{"hit", "miss", "corrupt", "error"} {
		zero("orderagg_cache_reads_total", map[string]string{"outcome": o})
	}
	for _, o := range []string{"ok", "stale", "dropped", "error"} {
		zero("orderagg_cache_writes_total", map[string]string{"outcome": o})
	}
	for _, dep := range deps {
		for _, ev := range eventNames() {
			if ev == "cache_miss" {
				for _, reason := range knownMissReasons {
					zero("orderagg_dependency_events_total", map[string]string{"dependency": dep, "event": ev, "reason": reason})
				}
				continue
			}
			zero("orderagg_dependency_events_total", map[string]string{"dependency": dep, "event": ev})
		}
		zero("orderagg_dependency_calls_total", map[string]string{"dependency": dep})
		zero("orderagg_breaker_transitions_total", map[string]string{"dependency": dep, "from": "CLOSED", "to": "OPEN"})
	}
}
