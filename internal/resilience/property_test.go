package resilience

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Never more calls run than the bulkhead's capacity, with or without a queue.
func TestPropertyBulkheadNeverOversubscribed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 6).Draw(t, "capacity")
		queue := rapid.IntRange(0, 4).Draw(t, "queue")
		callers := rapid.IntRange(1, 24).Draw(t, "callers")
		g, err := New("p", Config{Bulkhead: BulkheadConfig{MaxConcurrent: capacity, MaxQueue: queue, MaxWait: 50 * time.Millisecond}})
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
		if n := g.bulkhead.inUse.Load(); n != 0 {
			t.Fatalf("%d slots still taken", n)
		}
		if n := g.bulkhead.queued.Load(); n != 0 {
			t.Fatalf("%d calls still queued", n)
		}
	})
}

// A half-open breaker never admits more probes than configured, however
// many callers arrive at once.
func TestPropertyHalfOpenProbesBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		probes := rapid.IntRange(1, 4).Draw(t, "probes")
		callers := rapid.IntRange(1, 16).Draw(t, "callers")
		clk := newFakeClock()
		g, err := New("p", Config{
			Breaker: BreakerConfig{MinRequests: 1, HalfOpenProbes: probes},
			Retry:   RetryConfig{MaxAttempts: 1},
		}, WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		Do(context.Background(), g, fail) // opens it
		clk.Advance(g.Config().Breaker.SleepWindow)

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
		if a := admitted.Load(); a > int64(probes) {
			t.Fatalf("%d probes admitted, %d configured", a, probes)
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

// Retries and hedges stay within the retry budget over the window.
func TestPropertyRetriesWithinBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		percent := rapid.Float64Range(1, 100).Draw(t, "budget_percent")
		minimum := rapid.IntRange(0, 10).Draw(t, "budget_min")
		attempts := rapid.IntRange(2, 5).Draw(t, "max_attempts")
		calls := rapid.IntRange(1, 150).Draw(t, "calls")
		failRate := rapid.Float64Range(0, 1).Draw(t, "fail_rate")
		clk := newFakeClock()
		clk.auto = true
		g, err := New("p", Config{
			Retry:   RetryConfig{MaxAttempts: attempts, BudgetPercent: percent, BudgetMin: minimum},
			Breaker: BreakerConfig{MinRequests: 1 << 30, ConsecutiveFailures: 1 << 30},
		}, WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		physical := 0
		seq := rapid.SliceOfN(rapid.Float64Range(0, 1), calls, calls).Draw(t, "draws")
		i := 0
		for range calls {
			Do(context.Background(), g, func(context.Context) (int, error) {
				physical++
				d := seq[i%len(seq)]
				i++
				if d < failRate {
					return 0, errBoom
				}
				return 1, nil
			})
		}
		retries := physical - calls
		eff := g.Config().Retry // a zero minimum means the default
		allowed := int(float64(calls)*eff.BudgetPercent/100) + eff.BudgetMin
		if retries > allowed {
			t.Fatalf("%d retries for %d calls; budget %v%% + %d allows %d", retries, calls, eff.BudgetPercent, eff.BudgetMin, allowed)
		}
	})
}

// No call returns after its deadline plus a small scheduling margin, however
// the sub-budget and the caller's deadline compare.
func TestPropertyNoCallOutlivesItsBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		timeout := time.Duration(rapid.IntRange(1, 15).Draw(t, "timeout_ms")) * time.Millisecond
		deadline := time.Duration(rapid.IntRange(1, 15).Draw(t, "deadline_ms")) * time.Millisecond
		hedge := rapid.Bool().Draw(t, "hedge")
		g, err := New("p", Config{Timeout: timeout, Hedge: HedgeConfig{Enabled: hedge, MinDelay: time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		_, err = Do(ctx, g, blockUntilDone)
		took := time.Since(start)
		// A guard that ignored its budget would wait forever here (fn blocks
		// until cancelled); the margin only absorbs scheduling on a loaded,
		// race-instrumented 2-core machine.
		const margin = 250 * time.Millisecond
		if limit := min(timeout, deadline) + margin; took > limit {
			t.Fatalf("returned after %v, budget %v", took, min(timeout, deadline))
		}
		if k := KindOf(err); k != KindTimeout && k != KindDeadline {
			t.Fatalf("kind %v", k)
		}
	})
}
