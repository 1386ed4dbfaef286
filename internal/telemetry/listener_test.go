package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// TestFallbackLogRateLimited: an outage that falls back on every request
// logs one line per dependency per interval.
func TestFallbackLogRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		l := h.tel.Listener()
		ctx := context.Background()
		timedOut := &resilience.Error{Kind: resilience.KindTimeout, Err: context.DeadlineExceeded}
		fallback := func(dep string) {
			l.OnEvent(ctx, resilience.Event{Dependency: dep, Kind: resilience.KindSuccess, Fallback: true, Cause: timedOut})
		}

		for range 5 {
			fallback("inventory")
		}
		fallback("logistics") // its own budget: not suppressed by inventory's
		time.Sleep(999 * time.Millisecond)
		fallback("inventory") // still within the second
		time.Sleep(time.Millisecond)
		rejected := &resilience.Error{Dependency: "inventory", Kind: resilience.KindRejected}
		l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: resilience.KindFailure, Fallback: true, Cause: rejected, Err: errors.New("no last-good answer")})

		lines := h.logs.jsonLines(t)
		if len(lines) != 3 {
			t.Fatalf("got %d log lines, want 3:\n%s", len(lines), h.logs)
		}
		want := []map[string]any{
			{"level": "WARN", "msg": "dependency fallback", "dependency": "inventory", "event": "fallback_success", "cause": "timeout", "error": timedOut.Error()},
			{"level": "WARN", "msg": "dependency fallback", "dependency": "logistics", "event": "fallback_success", "cause": "timeout"},
			{"level": "WARN", "msg": "dependency fallback", "dependency": "inventory", "event": "fallback_failure", "cause": "rejected", "error": "inventory: bulkhead full", "fallback_error": "no last-good answer"},
		}
		for i, w := range want {
			for k, v := range w {
				if lines[i][k] != v {
					t.Errorf("line %d: %s = %v, want %v (line %v)", i, k, lines[i][k], v, lines[i])
				}
			}
		}
	})
}

// TestFallbackCauseIsItsCall: the cause logged with a fallback is the
// failure of the call it stands in for, not the latest one of the
// dependency, which may belong to another request.
func TestFallbackCauseIsItsCall(t *testing.T) {
	h := newHarness(t)
	g, err := resilience.New("coupon", resilience.Config{Retry: resilience.RetryConfig{MaxAttempts: 1}},
		resilience.WithListener(h.tel.Listener()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, timedOut := resilience.Do(ctx, g, func(context.Context) (int, error) { return 0, resilience.ErrTimeout })
	_, _ = resilience.Do(ctx, g, func(context.Context) (int, error) { return 0, errors.New("500 from coupon") }) // another request's
	_, _ = resilience.Fallback(ctx, g, timedOut, func(context.Context, error) (int, error) { return 0, nil })
	lines := h.logs.jsonLines(t)
	if len(lines) != 1 || lines[0]["cause"] != "timeout" || lines[0]["error"] != timedOut.Error() {
		t.Fatalf("want one line with the call's timeout as its cause, got %v", lines)
	}
}

func TestStateChangesLogged(t *testing.T) {
	h := newHarness(t)
	l := h.tel.Listener()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range [][2]resilience.State{
		{resilience.StateClosed, resilience.StateOpen},
		{resilience.StateOpen, resilience.StateHalfOpen},
		{resilience.StateHalfOpen, resilience.StateClosed},
		{resilience.StateClosed, resilience.StateForcedOpen},
	} {
		l.OnStateChange(resilience.StateChange{Dependency: "logistics", From: c[0], To: c[1], At: at})
	}
	lines := h.logs.jsonLines(t)
	want := []struct{ level, to string }{{"WARN", "OPEN"}, {"INFO", "HALF_OPEN"}, {"INFO", "CLOSED"}, {"WARN", "FORCED_OPEN"}}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), h.logs)
	}
	for i, w := range want {
		if lines[i]["level"] != w.level || lines[i]["to"] != w.to || lines[i]["dependency"] != "logistics" {
			t.Errorf("line %d = %v, want level %s to %s", i, lines[i], w.level, w.to)
		}
	}
	fams := scrape(t, h.tel)
	tr := map[string]string{"dependency": "logistics", "from": "CLOSED", "to": "OPEN"}
	if got := mustSample(t, fams, "orderagg_breaker_transitions_total", tr); got != 1 {
		t.Errorf("transitions%v = %v, want 1", tr, got)
	}
}

// TestBreakerOpensThroughGuard drives a real guard until its breaker opens
// and checks the transition reaches both the counter and the log.
func TestBreakerOpensThroughGuard(t *testing.T) {
	h := newHarness(t)
	g, err := resilience.New("logistics", resilience.Config{
		Breaker: resilience.BreakerConfig{MinRequests: 2},
		Retry:   resilience.RetryConfig{MaxAttempts: 1},
	}, resilience.WithListener(h.tel.Listener()))
	if err != nil {
		t.Fatal(err)
	}
	fail := func(context.Context) (int, error) { return 0, errors.New("500") }
	for range 3 {
		_, _ = resilience.Do(context.Background(), g, fail)
	}
	fams := scrape(t, h.tel)
	tr := map[string]string{"dependency": "logistics", "from": "CLOSED", "to": "OPEN"}
	if got := mustSample(t, fams, "orderagg_breaker_transitions_total", tr); got != 1 {
		t.Errorf("transitions%v = %v, want 1", tr, got)
	}
	ev := map[string]string{"dependency": "logistics", "event": "short_circuited"}
	if got := mustSample(t, fams, "orderagg_dependency_events_total", ev); got != 1 {
		t.Errorf("events%v = %v, want 1", ev, got)
	}
	var warned bool
	for _, l := range h.logs.jsonLines(t) {
		warned = warned || (l["level"] == "WARN" && l["to"] == "OPEN")
	}
	if !warned {
		t.Errorf("no WARN line for the breaker opening:\n%s", h.logs)
	}
}

// fakeNow is a settable clock.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeNow() *fakeNow { return &fakeNow{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (f *fakeNow) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeNow) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

// stepClock is a resilience.Clock that moves only when told; its waits and
// deadlines last as long in real time (the calls below never wait on one).
type stepClock struct{ now *fakeNow }

func (c stepClock) Now() time.Time { return c.now.Now() }

func (stepClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (c stepClock) WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.Sub(c.Now()))
}

// TestAdaptiveTimeoutThroughGuard drives a real guard with timeout: auto
// and checks that each move of its sub-budget is logged at INFO with both
// values, and that the gauge shows the value in force.
func TestAdaptiveTimeoutThroughGuard(t *testing.T) {
	h := newHarness(t)
	clk := stepClock{newFakeNow()}
	g, err := resilience.New("logistics", resilience.Config{Timeout: 500 * time.Millisecond, AutoTimeout: true},
		resilience.WithClock(clk), resilience.WithListener(h.tel.Listener()))
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := resilience.New("coupon", resilience.Config{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.tel.Observe(State{Guards: []*resilience.Guard{g, fixed}}); err != nil {
		t.Fatal(err)
	}
	ok := func(context.Context) (int, error) { return 1, nil }
	// Answers that take no time on the guard's clock: the rule is the 50ms
	// margin alone, reached in 25 % steps a second.
	// The guard's deadlines are real (context deadlines): on a loaded
	// machine a stall longer than the 50ms the rule reaches can time a call
	// out. A timed-out call is censored, never a sample, so the moves below
	// do not depend on how many there were; only a few are tolerated.
	timeouts := 0
	for range 12 {
		clk.now.Advance(time.Second)
		for range 200 {
			_, err := resilience.Do(context.Background(), g, ok)
			switch resilience.KindOf(err) {
			case resilience.KindSuccess:
			case resilience.KindTimeout:
				timeouts++
			default:
				t.Fatal(err)
			}
		}
	}
	if timeouts > 240 {
		t.Fatalf("%d of 2400 calls timed out: the guard's deadline is not the sub-budget", timeouts)
	}
	var moves []string
	for _, l := range h.logs.jsonLines(t) {
		if l["msg"] == "adaptive timeout down" && l["level"] == "INFO" && l["dependency"] == "logistics" {
			// This handler writes durations as nanoseconds (the service's
			// own writes them as strings).
			from, to := time.Duration(l["from"].(float64)), time.Duration(l["to"].(float64))
			moves = append(moves, fmt.Sprintf("%v→%v", from, to))
		}
	}
	want := "[500ms→375ms 375ms→281ms 281ms→211ms 211ms→158ms 158ms→119ms 119ms→89ms 89ms→67ms 67ms→50ms]"
	if got := fmt.Sprint(moves); got != want {
		t.Fatalf("logged moves %s\nwant %s\n%s", got, want, h.logs)
	}
	fams := scrape(t, h.tel)
	for dep, want := range map[string]float64{"logistics": 0.05, "coupon": 0.3} {
		if got := mustSample(t, fams, "orderagg_dependency_timeout_seconds", map[string]string{"dependency": dep}); got != want {
			t.Errorf("timeout_seconds{%s} = %v, want %v", dep, got, want)
		}
	}
}
