package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// simLogisticsAlias is the second sim container's alias: it serves only the
// service's logistics calls, so stopping it takes logistics down alone.
const simLogisticsAlias = "sim-logistics"

// breakerConfig lets the logistics breaker open after a handful of calls and
// probe again 1 s later. Logistics is not retried, so each page is one call.
//
// The last-good read is the means by which every degraded page shows the
// cached logistics the test checks, not its subject: it gets 400 ms instead
// of the cache's 50 ms (and each fallback_timeout, which must exceed it,
// 500 ms, and --reserve, which must exceed it too, 450 ms), so that a read
// this loaded machine delays past 50 ms (seen once in six runs) cannot turn a
// cached copy into the semantic default.
const breakerReserve = "450ms"

const breakerConfig = `
dependencies:
  cache:
    timeout: 400ms
  order:
    fallback_timeout: 500ms
  inventory:
    fallback_timeout: 500ms
  coupon:
    fallback_timeout: 500ms
  logistics:
    fallback_timeout: 500ms
    breaker:
      min_requests: 4
      error_percent: 50
      sleep_window: 1s
    retry:
      max_attempts: 1
`

// A downstream container stopped and started again: the logistics breaker
// opens while it is gone (pages then short-circuit logistics to its cached
// copy at once), and closes again through HALF_OPEN once it is back.
func TestDownstreamStoppedAndRestarted(t *testing.T) {
	requireImages(t, images().Service, images().Redis)
	nw := newNetwork(t)
	_, redisAddr := startRedis(t, nw)
	_, simURL := startSim(t, nw)
	logC, _ := startSimAs(t, nw, simLogisticsAlias)
	_, base := startService(t, nw,
		map[string]string{"ORDERAGG_LOGISTICS_URL": "http://" + simLogisticsAlias + ":9100", "ORDERAGG_RESERVE": breakerReserve},
		withConfig(breakerConfig))

	// Warm the cache so short-circuited pages show the last good logistics.
	id := "o-dr001"
	live := order(t, base, id)
	requireHealthy(t, live)
	waitForKeys(t, redisAddr, lastGoodKey(depLogistics, id))
	// The page's logistics came from the second container, not the first.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n, err := simRequests(ctx, simURL, depLogistics); err != nil || n != 0 {
		t.Fatalf("the main sim served %d logistics calls (err %v); logistics must go to %s", n, err, simLogisticsAlias)
	}

	// Stop it: every call now fails (DNS has no sim-logistics, or the
	// connection is refused) until the breaker opens.
	stopTimeout := 5 * time.Second
	if err := logC.Stop(ctx, &stopTimeout); err != nil {
		t.Fatalf("stop %s: %v", simLogisticsAlias, err)
	}
	stopped := time.Now()
	var calls int
	eventually(t, 15*time.Second, func() (bool, string) {
		calls++
		a := order(t, base, id)
		s := a.Page.Logistics
		if s.Source != "cache" || (s.Reason != "FAILURE" && s.Reason != "TIMEOUT" && s.Reason != "SHORT_CIRCUITED") {
			t.Fatalf("%v: logistics is %s/%s with its service stopped, want its cached copy", a, s.Source, s.Reason)
		}
		st := breakerState(t, base, depLogistics)
		return st == "OPEN", "logistics breaker " + st
	})
	openedIn := time.Since(stopped)
	t.Logf("logistics container stopped: breaker OPEN after %v (%d pages)", openedIn.Round(time.Millisecond), calls)

	// Open: logistics is short-circuited, from the cache, at once: by the
	// service's own clock the page finished below logistics' sub-budget,
	// which a page that called it would have spent.
	subBudget := time.Duration(resilienceOf(t, base, depLogistics).TimeoutMS * float64(time.Millisecond))
	histBefore := requestDurations(t, base)
	a := order(t, base, id)
	hist := requestDurations(t, base).minus(histBefore)
	requireSection(t, a, depLogistics, "cache", "SHORT_CIRCUITED")
	if got, want := sectionContent(t, a.Body, "logistics"), sectionContent(t, live.Body, "logistics"); !reflect.DeepEqual(got, want) {
		t.Errorf("short-circuited logistics %v differs from the last live one %v", got, want)
	}
	for _, dep := range []string{depOrder, depInventory, depCoupon} {
		requireSection(t, a, dep, "live", "")
	}
	if n, bound := hist.below(subBudget); hist.count != 1 || n != 1 {
		t.Errorf("%v: request-duration histogram counted %v of %v pages at most %v: a short-circuited page must not wait for logistics' %v sub-budget",
			a, n, hist.count, bound, subBudget)
	}
	t.Logf("short-circuited page: %s in the service, %s on the host", ms(hist.mean()), ms(a.Latency))

	// Still down after the 1 s sleep window: the half-open probe fails and
	// the breaker opens again for another window; pages stay on the cache.
	eventually(t, 10*time.Second, func() (bool, string) {
		a := order(t, base, id)
		if s := a.Page.Logistics; s.Source != "cache" {
			t.Fatalf("%v: logistics is %s/%s, want its cached copy", a, s.Source, s.Reason)
		}
		n, _ := metric(scrape(t, base), "orderagg_breaker_transitions_total", map[string]string{"dependency": depLogistics, "from": "HALF_OPEN", "to": "OPEN"})
		return n >= 1, "no failed half-open probe yet"
	})
	if st := breakerState(t, base, depLogistics); st != "OPEN" {
		t.Errorf("logistics breaker %s after a failed probe, want OPEN", st)
	}

	// Start it again. Its port on the host may have changed; the service
	// reaches it by alias. The probe is made slow (300 ms, inside the 500 ms
	// sub-budget) so that HALF_OPEN lasts long enough to be seen.
	if err := logC.Start(ctx); err != nil {
		t.Fatalf("start %s again: %v", simLogisticsAlias, err)
	}
	restarted := time.Now()
	setFault(t, simURLOf(t, logC), depLogistics, `{"latency_ms":300}`)

	seen := []string{"OPEN"}
	note := func(st string) {
		if seen[len(seen)-1] != st {
			seen = append(seen, st)
		}
	}
	eventually(t, 15*time.Second, func() (bool, string) {
		// One page in the background; watch the breaker while it runs.
		var pa answer
		var perr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			defer pcancel()
			pa, perr = fetchOrder(pctx, httpClient, base, id)
		}()
	watch:
		for {
			sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
			states, err := resilience(sctx, base)
			scancel()
			if err != nil {
				<-done
				t.Fatal(err)
			}
			note(states[depLogistics].Breaker)
			select {
			case <-done:
				break watch
			case <-time.After(25 * time.Millisecond): // watch interval, bounded by the page
			}
		}
		if perr != nil {
			t.Fatal(perr)
		}
		if err := checkAnswer(pa); err != nil {
			t.Fatal(err)
		}
		st := breakerState(t, base, depLogistics)
		note(st)
		return st == "CLOSED", fmt.Sprintf("logistics breaker %s; states seen %v", st, seen)
	})
	closedIn := time.Since(restarted)
	clearFaults(t, simURLOf(t, logC))
	t.Logf("logistics container started: breaker CLOSED after %v; states seen %v", closedIn.Round(time.Millisecond), seen)
	if !slices.Contains(seen, "HALF_OPEN") {
		t.Logf("HALF_OPEN was not caught by polling (it lasts one probe); the transition counters below prove it")
	}
	if i, j := slices.Index(seen, "OPEN"), slices.Index(seen, "CLOSED"); i < 0 || j < i {
		t.Errorf("breaker states seen %v: want OPEN before CLOSED", seen)
	}
	requireSection(t, order(t, base, id), depLogistics, "live", "")

	// /metrics counted each transition.
	m := scrape(t, base)
	for _, tr := range []struct{ from, to string }{{"CLOSED", "OPEN"}, {"OPEN", "HALF_OPEN"}, {"HALF_OPEN", "CLOSED"}} {
		n, _ := metric(m, "orderagg_breaker_transitions_total", map[string]string{"dependency": depLogistics, "from": tr.from, "to": tr.to})
		if n < 1 {
			t.Errorf("orderagg_breaker_transitions_total{dependency=%q,from=%q,to=%q} = %v, want ≥ 1", depLogistics, tr.from, tr.to, n)
		}
	}
	if n, _ := metric(m, "orderagg_dependency_events_total", map[string]string{"dependency": depLogistics, "event": "short_circuited"}); n < 1 {
		t.Errorf("orderagg_dependency_events_total{dependency=logistics,event=short_circuited} = %v, want ≥ 1", n)
	}
	if st, _ := metric(m, "orderagg_breaker_state", map[string]string{"dependency": depLogistics}); st != 0 {
		t.Errorf("orderagg_breaker_state{dependency=logistics} = %v, want 0 (closed)", st)
	}
	reopen, _ := metric(m, "orderagg_breaker_transitions_total", map[string]string{"dependency": depLogistics, "from": "HALF_OPEN", "to": "OPEN"})
	t.Logf("logistics breaker: OPEN in %v, CLOSED %v after restart; failed probes while stopped (HALF_OPEN→OPEN): %v",
		openedIn.Round(time.Millisecond), closedIn.Round(time.Millisecond), reopen)
}

// sectionContent is a section of a page's body without its provenance
// (source, degraded, reason, as_of), for comparing a cached copy with the
// live answer it was taken from.
func sectionContent(t testing.TB, body []byte, name string) map[string]any {
	t.Helper()
	var p map[string]json.RawMessage
	var s map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("page: %v", err)
	}
	if err := json.Unmarshal(p[name], &s); err != nil {
		t.Fatalf("page section %s: %v", name, err)
	}
	for _, k := range []string{"source", "degraded", "reason", "as_of"} {
		delete(s, k)
	}
	return s
}
