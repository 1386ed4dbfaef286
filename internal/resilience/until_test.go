package resilience

import (
	"context"
	"errors"
	"testing"
	"time"
)

// DoUntil's bound cuts a call like the caller's deadline would: the call's
// context carries it, and the cut is the caller's doing, not a timeout.
func TestDoUntil(t *testing.T) {
	const at = 5 * time.Millisecond // where the first of the bounds falls
	answerAfterCut := func(clk *fakeClock) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			clk.Advance(at)
			<-ctx.Done()
			return "ok", nil // the caller still has its reserve: the answer serves
		}
	}
	tests := []struct {
		name   string
		cfg    Config
		ctx    time.Duration // the caller's deadline from now; 0: none
		until  time.Duration // from now
		answer bool          // fn answers after the cut instead of failing with its context
		want   Kind
		bySub  bool // the call's deadline is the sub-budget's, not until
		called bool
	}{
		{"bound before sub-budget", Config{Timeout: time.Hour}, 0, at, false, KindDeadline, false, true},
		{"sub-budget before bound", Config{Timeout: at}, 0, time.Hour, false, KindTimeout, true, true},
		{"caller's deadline before bound", Config{Timeout: time.Hour}, at, time.Hour, false, KindDeadline, false, true},
		{"bound passed", Config{}, 0, -time.Millisecond, false, KindDeadline, false, false},
		{"answer after the bound", Config{Timeout: time.Hour}, 0, at, true, KindSuccess, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			rec := &recorder{}
			g := mustGuard(t, tc.cfg, WithClock(clk), WithListener(rec))
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctx > 0 {
				ctx, cancel = withDeadline(clk, tc.ctx)
			}
			defer cancel()
			until := clk.Now().Add(tc.until)
			fn := hang(clk, at)
			if tc.answer {
				fn = answerAfterCut(clk)
			}
			called := false
			_, err := DoUntil(ctx, g, until, func(ctx context.Context) (string, error) {
				called = true
				dl, ok := ctx.Deadline()
				switch {
				case !ok:
					t.Error("the call's context has no deadline")
				case tc.bySub && !dl.Before(until):
					t.Errorf("deadline %v, want the sub-budget's, before until %v", dl, until)
				case !tc.bySub && dl.After(until):
					t.Errorf("deadline %v after until %v", dl, until)
				}
				return fn(ctx)
			})
			if got := KindOf(err); got != tc.want {
				t.Fatalf("kind = %v, want %v (err %v)", got, tc.want, err)
			}
			if called != tc.called {
				t.Fatalf("fn called: %v, want %v", called, tc.called)
			}
			if tc.want == KindDeadline && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%v does not wrap context.DeadlineExceeded", err)
			}
			if names := rec.names(); names[len(names)-1] != tc.want.String() {
				t.Fatalf("events %v, want last %v", names, tc.want)
			}
		})
	}
}

// Calls cut at the caller's bound say nothing about the dependency: a run of
// them leaves the breaker closed, where as many timeouts would open it.
func TestDoUntilCutsDoNotOpenTheBreaker(t *testing.T) {
	clk := newFakeClock()
	cut := mustGuard(t, breakerCfg(), WithClock(clk))
	timedOut := mustGuard(t, func() Config { c := breakerCfg(); c.Timeout = time.Millisecond; return c }(), WithClock(clk))
	for range 10 {
		DoUntil(context.Background(), cut, clk.Now().Add(time.Millisecond), hang(clk, time.Millisecond))
		DoUntil(context.Background(), timedOut, clk.Now().Add(time.Hour), hang(clk, time.Millisecond))
	}
	if s := cut.breaker.reported(); s != StateClosed {
		t.Errorf("calls cut at the bound opened the breaker: %v", s)
	}
	if s := timedOut.breaker.reported(); s != StateOpen {
		t.Errorf("ten timeouts left the breaker %v; the test's contrast is void", s)
	}
}
