package integration

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/config"
)

// breakerTripConfig leaves the logistics breaker's trip and window at their
// defaults; only its sleep window is long (1 min), so that no half-open
// probe can come among the short-circuited pages, however slowly this
// machine asks for them.
const breakerTripConfig = `
dependencies:
  logistics:
    breaker:
      sleep_window: 1m
`

// shortCircuitedPages is how many pages are asked once the breaker is open.
const shortCircuitedPages = 20

// A hung dependency is short-circuited after a run of timeouts, not once
// its rolling window has filled (issue #16).
//
// Logistics hangs (the sim's fault API) and pages of one order, whose
// logistics answer is cached, are asked one at a time: each is one logistics
// call, cut by its sub-budget (a timeout is not retried).
//
//   - The pages before the run is long enough (the built-in
//     consecutive_failures, 10) are degraded by TIMEOUT and leave the
//     breaker CLOSED; the page that completes the run leaves it OPEN. The
//     window cannot be what opened it: it holds fewer calls than its
//     min_requests.
//   - Then every page is SHORT_CIRCUITED: logistics from its last-good copy
//     (the content of the live answer), the other sections live, and not
//     one call reaches the sim.
//   - Short-circuited pages do not wait: by the service's own
//     request-duration histogram each one finished in a bucket below
//     logistics' sub-budget, while not one timed-out page did.
func TestBreakerOpensWhileDependencyHangs(t *testing.T) {
	requireImages(t, images().Service, images().Redis)
	builtIn, ok := config.DefaultDependencies().Get(depLogistics)
	if !ok {
		t.Fatalf("no built-in settings for %s", depLogistics)
	}
	trip, minRequests := builtIn.Breaker.ConsecutiveFailures, builtIn.Breaker.MinRequests
	nw := newNetwork(t)
	_, redisAddr := startRedis(t, nw)
	_, simURL := startSim(t, nw)
	_, base := startService(t, nw, nil, withConfig(breakerTripConfig))
	subBudget := time.Duration(resilienceOf(t, base, depLogistics).TimeoutMS * float64(time.Millisecond))

	// One healthy page caches the order's logistics answer.
	id := "o-bt001"
	live := order(t, base, id)
	requireHealthy(t, live)
	waitForKeys(t, redisAddr, lastGoodKey(depLogistics, id))
	const warmCalls = 1
	if warmCalls+trip >= minRequests {
		t.Fatalf("built-in logistics breaker: consecutive_failures %d and min_requests %d: the window could open it too, this test cannot tell the trip from it",
			trip, minRequests)
	}
	simBefore := simLogistics(t, simURL)

	// The run of timeouts.
	setFault(t, simURL, depLogistics, `{"hang":true}`)
	t.Cleanup(func() { clearFaults(t, simURL) })
	histBefore := requestDurations(t, base)
	runStart := time.Now()
	var hung []time.Duration
	fromCache := map[string]int{}
	for k := 1; k <= trip; k++ {
		a := order(t, base, id)
		s := a.Page.Logistics
		if s.Reason != "TIMEOUT" {
			t.Fatalf("page %d of the run: %v: logistics %s/%s, want degraded by TIMEOUT", k, a, s.Source, s.Reason)
		}
		requireDegradedShape(t, a, live)
		fromCache["TIMEOUT/"+s.Source]++
		hung = append(hung, a.Latency)
		want := "CLOSED"
		if k == trip {
			want = "OPEN"
		}
		if st := breakerState(t, base, depLogistics); st != want {
			t.Fatalf("after %d timed-out pages (consecutive_failures %d): logistics breaker %s, want %s", k, trip, st, want)
		}
	}
	openedIn := time.Since(runStart)
	histHung := requestDurations(t, base).minus(histBefore)

	// Open: short-circuited pages.
	scBefore := dependencyEvents(t, base, depLogistics, "short_circuited")
	histOpen := requestDurations(t, base)
	var short []time.Duration
	for range shortCircuitedPages {
		a := order(t, base, id)
		s := a.Page.Logistics
		if s.Reason != "SHORT_CIRCUITED" {
			t.Fatalf("%v: logistics %s/%s with the breaker open, want SHORT_CIRCUITED", a, s.Source, s.Reason)
		}
		requireDegradedShape(t, a, live)
		fromCache["SHORT_CIRCUITED/"+s.Source]++
		short = append(short, a.Latency)
	}
	histShort := requestDurations(t, base).minus(histOpen)
	if fromCache["SHORT_CIRCUITED/cache"] == 0 {
		t.Errorf("no short-circuited page served logistics from its cached copy (%v)", fromCache)
	}
	if n := dependencyEvents(t, base, depLogistics, "short_circuited") - scBefore; n != shortCircuitedPages {
		t.Errorf("orderagg_dependency_events_total{dependency=logistics,event=short_circuited} grew by %v over %d short-circuited pages", n, shortCircuitedPages)
	}
	if st := breakerState(t, base, depLogistics); st != "OPEN" {
		t.Errorf("logistics breaker %s after the short-circuited pages, want OPEN (sleep window 1 min)", st)
	}
	if n, _ := metric(scrape(t, base), "orderagg_breaker_transitions_total",
		map[string]string{"dependency": depLogistics, "from": "CLOSED", "to": "OPEN"}); n != 1 {
		t.Errorf("orderagg_breaker_transitions_total{dependency=logistics,from=CLOSED,to=OPEN} = %v, want 1", n)
	}
	// Only the timed-out pages called logistics. A hung request reaches the
	// sim's counter when the sim gets to it, possibly after the page that
	// made it was answered: wait for the run's calls, and fail on more.
	want := simBefore + trip
	eventually(t, 10*time.Second, func() (bool, string) {
		n := simLogistics(t, simURL)
		if n > want {
			t.Fatalf("the sim received %d logistics calls since the hang began: %d timed-out pages, and %d more from short-circuited pages",
				n-simBefore, trip, n-want)
		}
		return n == want, fmt.Sprintf("the sim received %d logistics calls since the hang began, want the run's %d", n-simBefore, trip)
	})

	// Server side: none of the run's pages finished below the sub-budget,
	// every short-circuited one did.
	hungBelow, bound := histHung.below(subBudget)
	if histHung.count != float64(trip) || hungBelow != 0 {
		t.Errorf("request-duration histogram over the run: %v of %v pages at most %v, want none of %d (each waited for logistics' %v sub-budget)",
			hungBelow, histHung.count, bound, trip, subBudget)
	}
	shortBelow, _ := histShort.below(subBudget)
	if histShort.count != shortCircuitedPages || shortBelow != shortCircuitedPages {
		t.Errorf("request-duration histogram over the short-circuited pages: %v of %v pages at most %v, want all %d (none may wait for logistics' %v sub-budget)",
			shortBelow, histShort.count, bound, shortCircuitedPages, subBudget)
	}
	fast, fastBound := histShort.below(10 * time.Millisecond)

	t.Logf("logistics hung: breaker OPEN after %d timed-out pages (consecutive_failures %d; min_requests %d not reached), %v after the first, one page at a time; sub-budget %v",
		trip, trip, minRequests, openedIn.Round(time.Millisecond), subBudget)
	t.Logf("timed-out pages: server mean %s; host P50 %s, max %s", ms(histHung.mean()), ms(percentile(hung, 50)), ms(slices.Max(hung)))
	t.Logf("short-circuited pages: server mean %s, %v of %v at most %v; host P50 %s, max %s; sections %v",
		ms(histShort.mean()), fast, histShort.count, fastBound, ms(percentile(short, 50)), ms(slices.Max(short)), fromCache)
}

// requireDegradedShape checks a page whose logistics is degraded: the other
// sections live, logistics either the cached copy of the live answer or
// the semantic default (a cache read can miss its own small budget on a
// loaded machine; the reason stays the breaker's).
func requireDegradedShape(t testing.TB, a, live answer) {
	t.Helper()
	requireOthersLive(t, a, depLogistics)
	switch a.Page.Logistics.Source {
	case "cache":
		if got, want := sectionContent(t, a.Body, "logistics"), sectionContent(t, live.Body, "logistics"); !reflect.DeepEqual(got, want) {
			t.Errorf("%v: cached logistics %v differs from the last live one %v", a, got, want)
		}
	case "fallback":
		requireFallbackShape(t, a, depLogistics)
	default:
		t.Fatalf("%v: logistics is %s, want cache or fallback", a, a.Page.Logistics.Source)
	}
}

// simLogistics is how many logistics requests the sim has received.
func simLogistics(t testing.TB, simURL string) int {
	t.Helper()
	n, err := simRequests(t.Context(), simURL, depLogistics)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// dependencyEvents reads one event count of a dependency from /metrics.
func dependencyEvents(t testing.TB, base, dep, event string) float64 {
	t.Helper()
	n, _ := metric(scrape(t, base), "orderagg_dependency_events_total", map[string]string{"dependency": dep, "event": event})
	return n
}

// durations is the service's order-detail request-duration histogram
// (arrival to answer, measured in the service), summed over its status and
// degraded series.
type durations struct {
	count, sum float64
	le         map[float64]float64 // cumulative count by upper bound, seconds
}

const requestDuration = "orderagg_http_request_duration_seconds"

// requestDurations reads the histogram from /metrics.
func requestDurations(t testing.TB, base string) durations {
	t.Helper()
	m := scrape(t, base)
	d := durations{le: map[float64]float64{}}
	d.count, _ = metric(m, requestDuration+"_count", nil)
	d.sum, _ = metric(m, requestDuration+"_sum", nil)
	for _, s := range m {
		if s.name != requestDuration+"_bucket" {
			continue
		}
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err != nil {
			t.Fatalf("%s: le %q: %v", s.name, s.labels["le"], err)
		}
		d.le[le] += s.value
	}
	return d
}

// minus is what d counted since before.
func (d durations) minus(before durations) durations {
	out := durations{count: d.count - before.count, sum: d.sum - before.sum, le: map[float64]float64{}}
	for le, n := range d.le {
		out.le[le] = n - before.le[le]
	}
	return out
}

// below is how many answers took at most the largest bucket bound under
// limit, and that bound (0 and 0 if no bound is under it).
func (d durations) below(limit time.Duration) (float64, time.Duration) {
	best := math.Inf(-1)
	for le := range d.le {
		if le < limit.Seconds() && le > best {
			best = le
		}
	}
	if math.IsInf(best, -1) {
		return 0, 0
	}
	return d.le[best], time.Duration(best * float64(time.Second))
}

// mean is the answers' mean duration.
func (d durations) mean() time.Duration {
	if d.count == 0 {
		return 0
	}
	return time.Duration(d.sum / d.count * float64(time.Second))
}
