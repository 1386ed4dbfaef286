package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// TestFallbackLogRateLimited: an outage that falls back on every request
// logs one line per dependency per interval, and the next line says how
// many were held back.
func TestFallbackLogRateLimited(t *testing.T) {
	h := newHarness(t)
	l := h.tel.Listener(h.log)
	ctx := context.Background()
	fallback := func(dep string) {
		l.OnEvent(ctx, resilience.Event{Dependency: dep, Kind: resilience.KindTimeout, Attempt: 1, Err: context.DeadlineExceeded})
		l.OnEvent(ctx, resilience.Event{Dependency: dep, Kind: resilience.KindSuccess, Fallback: true})
	}

	for range 5 {
		fallback("inventory")
	}
	fallback("logistics") // its own budget: not suppressed by inventory's
	h.clock.Advance(999 * time.Millisecond)
	fallback("inventory") // still within the second
	l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: resilience.KindRejected})
	h.clock.Advance(time.Millisecond)
	l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: resilience.KindFailure, Fallback: true, Err: errors.New("no last-good answer")})

	lines := h.logs.jsonLines(t)
	if len(lines) != 3 {
		t.Fatalf("got %d log lines, want 3:\n%s", len(lines), h.logs)
	}
	want := []map[string]any{
		{"level": "WARN", "msg": "dependency fallback", "dependency": "inventory", "event": "fallback_success", "cause": "timeout", "error": "context deadline exceeded", "suppressed": 0.0},
		{"level": "WARN", "msg": "dependency fallback", "dependency": "logistics", "event": "fallback_success", "cause": "timeout", "suppressed": 0.0},
		{"level": "WARN", "msg": "dependency fallback", "dependency": "inventory", "event": "fallback_failure", "cause": "rejected", "fallback_error": "no last-good answer", "suppressed": 5.0},
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v (line %v)", i, k, lines[i][k], v, lines[i])
			}
		}
	}
	if _, ok := lines[2]["error"]; ok {
		t.Errorf("a rejection has no error of its own, yet the line has one: %v", lines[2])
	}
}

// TestHedgeLoserIsNotACause: the losing attempt of a hedge is reported as a
// deadline while the caller is still waiting; it must not be named as the
// reason for a later fallback.
func TestHedgeLoserIsNotACause(t *testing.T) {
	h := newHarness(t)
	l := h.tel.Listener(h.log)
	ctx := context.Background()
	l.OnEvent(ctx, resilience.Event{Dependency: "coupon", Kind: resilience.KindFailure, Attempt: 1})
	l.OnEvent(ctx, resilience.Event{Dependency: "coupon", Kind: resilience.KindDeadline, Attempt: 2, Hedge: true, Err: context.Canceled})
	l.OnEvent(ctx, resilience.Event{Dependency: "coupon", Kind: resilience.KindSuccess, Fallback: true})
	lines := h.logs.jsonLines(t)
	if len(lines) != 1 || lines[0]["cause"] != "failure" {
		t.Fatalf("want one line with cause failure, got %v", lines)
	}
}

func TestStateChangesLogged(t *testing.T) {
	h := newHarness(t)
	l := h.tel.Listener(h.log)
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
	}, resilience.WithListener(h.tel.Listener(h.log)))
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

func TestLimiter(t *testing.T) {
	clk := newFakeNow()
	l := newLimiter(clk.Now, time.Second)
	if ok, n := l.allow(); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for range 3 {
		if ok, _ := l.allow(); ok {
			t.Fatal("allowed within the interval")
		}
	}
	clk.Advance(time.Second)
	if ok, n := l.allow(); !ok || n != 3 {
		t.Fatalf("after the interval: %v %d, want true 3", ok, n)
	}
	clk.Advance(5 * time.Second)
	if ok, n := l.allow(); !ok || n != 0 {
		t.Fatalf("after a quiet spell: %v %d, want true 0", ok, n)
	}
}
