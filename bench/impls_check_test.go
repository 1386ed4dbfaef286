package bench

import (
	"context"
	"testing"
	"time"
)

// TestImplementations checks that every implementation is wired as the
// benchmarks assume: a no-op call succeeds, and a stalled call comes back
// at about the timeout, not the stall.
func TestImplementations(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			do := im.new(spec{Capacity: 2, Timeout: 20 * time.Millisecond, MinRequests: 1 << 30})
			if v, err := do(context.Background(), noop); err != nil || v != 1 {
				t.Fatalf("noop: got %v, %v", v, err)
			}
			var d dependency
			start := time.Now()
			_, err := do(context.Background(), d.call)
			if took := time.Since(start); err == nil || took >= stallFor {
				t.Fatalf("stalled call: err %v after %v; want a timeout before %v", err, took, stallFor)
			}
			if im.turnedAway(err) {
				t.Fatalf("a timeout classified as turned away: %v", err)
			}

			// With both slots held by stalled calls, a third is turned away.
			for d.inflight.Load() > 0 {
				time.Sleep(time.Millisecond) // hystrix's work outlives its call
			}
			done := make(chan struct{}, 2)
			for range 2 {
				go func() {
					do(context.Background(), d.call)
					done <- struct{}{}
				}()
			}
			for d.inflight.Load() < 2 {
				time.Sleep(100 * time.Microsecond)
			}
			if _, err := do(context.Background(), noop); !im.turnedAway(err) {
				t.Fatalf("third call with the bulkhead full: got %v, want turned away", err)
			}
			<-done
			<-done
		})
	}
}
