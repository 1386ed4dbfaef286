package resilience

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Never more calls run than the bulkhead's capacity.
func TestPropertyBulkheadNeverOversubscribed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 6).Draw(t, "capacity")
		callers := rapid.IntRange(1, 24).Draw(t, "callers")
		g, err := New("p", Config{Bulkhead: BulkheadConfig{MaxConcurrent: capacity}})
		if err != nil {
			t.Fatal(err)
		}
		var running, peak atomic.Int64
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				Do(context.Background(), g, func(context.Context) (int, error) {
					n := running.Add(1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(200 * time.Microsecond)
					running.Add(-1)
					return 0, nil
				})
			})
		}
		wg.Wait()
		if p := peak.Load(); p > int64(capacity) {
			t.Fatalf("%d calls ran at once, capacity %d", p, capacity)
		}
		if n := inUse(g); n != 0 {
			t.Fatalf("%d slots still taken", n)
		}
	})
}

// A half-open breaker admits one probe, however many callers arrive at once.
func TestPropertyOneHalfOpenProbe(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		callers := rapid.IntRange(1, 16).Draw(t, "callers")
		clk := newFakeClock()
		g, err := New("p", Config{
			Breaker: BreakerConfig{MinRequests: 1},
			Retry:   RetryConfig{MaxAttempts: 1},
		}, WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		Do(context.Background(), g, fail) // opens it
		clk.Advance(g.cur.Load().cfg.Breaker.SleepWindow)

		release := make(chan struct{})
		var admitted atomic.Int64
		var wg sync.WaitGroup
		results := make(chan error, callers)
		for range callers {
			wg.Go(func() {
				_, err := Do(context.Background(), g, func(context.Context) (int, error) {
					admitted.Add(1)
					<-release
					return 1, nil
				})
				results <- err
			})
		}
		// Every caller either runs (blocked on release) or was turned away.
		waitFor(t, func() bool {
			return int(admitted.Load())+len(results) == callers
		})
		if a := admitted.Load(); a > 1 {
			t.Fatalf("%d probes admitted, want 1", a)
		}
		close(release)
		wg.Wait()
		close(results)
		for err := range results {
			if err != nil && !errors.Is(err, ErrShortCircuited) {
				t.Fatalf("unexpected %v", err)
			}
		}
	})
}

// Every attempt of a call runs under a deadline no later than its start plus
// the tighter of the sub-budget and the caller's deadline, however the two
// compare, and the call returns once its attempts
// are cut off (fn blocks until cancelled: a guard that ignored its budget
// would wait forever).
func TestPropertyNoCallOutlivesItsBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		timeout := time.Duration(rapid.IntRange(1, 15).Draw(t, "timeout_ms")) * time.Millisecond
		deadline := time.Duration(rapid.IntRange(1, 15).Draw(t, "deadline_ms")) * time.Millisecond
		clk := newFakeClock()
		g, err := New("p", Config{Timeout: timeout}, WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		budget := min(timeout, deadline)
		var mu sync.Mutex
		var late []string
		fn := func(ctx context.Context) (string, error) {
			called := clk.Now()
			dl, ok := ctx.Deadline()
			if !ok || dl.After(called.Add(budget)) {
				mu.Lock()
				late = append(late, fmt.Sprintf("attempt's deadline %v after it began, budget %v", dl.Sub(called), budget))
				mu.Unlock()
				if !ok {
					return "", errBoom // blocking would hang the test
				}
			}
			clk.Advance(budget)
			<-ctx.Done()
			return "", ctx.Err()
		}
		ctx, cancel := withDeadline(clk, deadline)
		defer cancel()
		_, err = Do(ctx, g, fn)
		mu.Lock()
		defer mu.Unlock()
		for _, l := range late {
			t.Error(l)
		}
		if k := KindOf(err); k != KindTimeout && k != KindDeadline {
			t.Fatalf("kind %v", k)
		}
	})
}
