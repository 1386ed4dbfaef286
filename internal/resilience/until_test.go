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
	tests := []struct {
		name   string
		cfg    Config
		ctx    func() (context.Context, context.CancelFunc)
		until  time.Duration // from now
		fn     func(context.Context) (string, error)
		want   Kind
		bySub  bool // the call's deadline is the sub-budget's, not until
		called bool
	}{
		{"bound before sub-budget", Config{Timeout: time.Hour}, bg, 5 * time.Millisecond, blockUntilDone, KindDeadline, false, true},
		{"sub-budget before bound", Config{Timeout: 5 * time.Millisecond}, bg, time.Hour, blockUntilDone, KindTimeout, true, true},
		{"caller's deadline before bound", Config{Timeout: time.Hour}, withTimeout(5 * time.Millisecond), time.Hour, blockUntilDone, KindDeadline, false, true},
		{"bound passed", Config{}, bg, -time.Millisecond, ok, KindDeadline, false, false},
		{"answer after the bound", Config{Timeout: time.Hour}, bg, 5 * time.Millisecond, func(ctx context.Context) (string, error) {
			<-ctx.Done()
			return "ok", nil // the caller still has its reserve: the answer serves
		}, KindSuccess, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			g := mustGuard(t, tc.cfg, WithListener(rec))
			ctx, cancel := tc.ctx()
			defer cancel()
			start := time.Now()
			until := start.Add(tc.until)
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
				return tc.fn(ctx)
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
	cut := mustGuard(t, breakerCfg())
	timedOut := mustGuard(t, func() Config { c := breakerCfg(); c.Timeout = time.Millisecond; return c }())
	for range 10 {
		DoUntil(context.Background(), cut, time.Now().Add(time.Millisecond), blockUntilDone)
		DoUntil(context.Background(), timedOut, time.Now().Add(time.Hour), blockUntilDone)
	}
	if s := cut.breaker.reported(); s != StateClosed {
		t.Errorf("calls cut at the bound opened the breaker: %v", s)
	}
	if s := timedOut.breaker.reported(); s != StateOpen {
		t.Errorf("ten timeouts left the breaker %v; the test's contrast is void", s)
	}
}
