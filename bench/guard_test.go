package bench

import (
	"context"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
)

// noop is the guarded call of BenchmarkGuard: the dependency costs nothing,
// so what is measured is the guard.
func noop(context.Context) (int, error) { return 1, nil }

// noopSpec: a bulkhead large enough never to be full, the default 1s timeout,
// and the default breaker thresholds (a no-op never fails, so none trips).
// hystrix hands its ticket back on its own goroutine after DoC has returned,
// so under RunParallel its tickets in use can run well ahead of the callers:
// the capacity is large enough that no implementation ever rejects.
var noopSpec = spec{Capacity: 1 << 16, Timeout: time.Second, MinRequests: 20}

// goroutinesCreated is the runtime's count of goroutines created since start.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// reportGoroutines reports the goroutines started per call since before. Some
// implementations start theirs asynchronously (hystrix's metrics collector),
// so it lets them settle first, with the timer stopped.
func reportGoroutines(b *testing.B, before uint64) {
	b.StopTimer()
	time.Sleep(5 * time.Millisecond)
	b.ReportMetric(float64(goroutinesCreated()-before)/float64(b.N), "goroutines/op")
}

// BenchmarkGuard: one caller, back to back, through each implementation.
func BenchmarkGuard(b *testing.B) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			do := im.new(noopSpec)
			ctx := context.Background()
			b.ReportAllocs()
			before := goroutinesCreated()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := do(ctx, noop); err != nil {
					b.Fatal(err)
				}
			}
			reportGoroutines(b, before)
		})
	}
}

// BenchmarkGuardParallel: GOMAXPROCS callers sharing one guard; compare
// -cpu 1 with -cpu 2 to see whether a second core adds throughput.
func BenchmarkGuardParallel(b *testing.B) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			do := im.new(noopSpec)
			ctx := context.Background()
			b.ReportAllocs()
			before := goroutinesCreated()
			b.ResetTimer()
			var failed atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := do(ctx, noop); err != nil {
						failed.Add(1)
					}
				}
			})
			if n := failed.Load(); n > 0 {
				// Not fatal: a peer that turns calls away under load is a
				// result, reported beside its cost.
				b.ReportMetric(float64(n)/float64(b.N), "errors/op")
			}
			reportGoroutines(b, before)
		})
	}
}
