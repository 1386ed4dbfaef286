package bench

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The stall scenario: the dependency has stalled (every call would take
// stallFor), the guard's timeout is stallTimeout, the bulkhead holds
// stallCapacity calls, and stallCallers callers keep calling for
// stallRound. A caller turned away (rejected or short-circuited) pauses
// stallPause before trying again; an admitted call ends at the timeout.
const (
	stallFor      = 50 * time.Millisecond
	stallTimeout  = 10 * time.Millisecond
	stallCapacity = 10
	stallCallers  = 64
	stallRound    = 200 * time.Millisecond
	stallPause    = time.Millisecond
)

// Breakers are set never to trip (a huge MinRequests), so that what is
// measured is the bulkhead and the timeout, not how soon each breaker opens.
var stallSpec = spec{Capacity: stallCapacity, Timeout: stallTimeout, MinRequests: 1 << 30}

// dependency is the stalled downstream. It counts the calls that reached it
// and the work in flight, and honours its context: it returns at once when
// ctx is done.
type dependency struct {
	calls    atomic.Int64
	inflight atomic.Int64
	peak     atomic.Int64
	peakG    atomic.Int64 // highest runtime.NumGoroutine seen
}

func raise(p *atomic.Int64, v int64) {
	for {
		old := p.Load()
		if v <= old || p.CompareAndSwap(old, v) {
			return
		}
	}
}

func (d *dependency) sampleGoroutines() { raise(&d.peakG, int64(runtime.NumGoroutine())) }

func (d *dependency) call(ctx context.Context) (int, error) {
	d.calls.Add(1)
	raise(&d.peak, d.inflight.Add(1))
	defer d.inflight.Add(-1)
	d.sampleGoroutines()
	t := time.NewTimer(stallFor)
	defer t.Stop()
	select {
	case <-t.C:
		return 1, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

type roundResult struct {
	calls, accepted, rejected int64
	wall, drain               time.Duration
	peakInflight, peakG       int64
}

// stallRound runs one round: stallCallers callers for stallRound, then waits
// for the dependency's work to drain.
func runStallRound(do call, turnedAway func(error) bool) roundResult {
	var d dependency
	base := int64(runtime.NumGoroutine())
	d.peakG.Store(base)
	var calls, rejected atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	start := time.Now()
	end := start.Add(stallRound)
	for range stallCallers {
		wg.Go(func() {
			ctx := context.Background()
			fn := d.call // once: a method value per call would allocate
			for time.Now().Before(end) {
				_, err := do(ctx, fn)
				calls.Add(1)
				d.sampleGoroutines()
				if err != nil && turnedAway(err) {
					rejected.Add(1)
					time.Sleep(stallPause) // turned away: back off
				}
			}
		})
	}
	// A sampler catches goroutine peaks between the callers' own samples.
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				d.sampleGoroutines()
			}
		}
	}()
	wg.Wait()
	wall := time.Since(start)
	for d.inflight.Load() > 0 {
		time.Sleep(100 * time.Microsecond)
	}
	drain := time.Since(start) - wall
	close(stop)
	<-sampled
	return roundResult{
		calls:        calls.Load(),
		accepted:     d.calls.Load(),
		rejected:     rejected.Load(),
		wall:         wall,
		drain:        drain,
		peakInflight: d.peak.Load(),
		peakG:        d.peakG.Load() - base,
	}
}

// BenchmarkStall: one op is one round of the stall scenario; the metrics are
// per round, averaged over b.N rounds. accepted = calls that reached the
// dependency; rejected = calls turned away (bulkhead full or breaker open,
// by each implementation's own error); peak-inflight
// = most dependency calls running at once (the bulkhead should cap it at
// 10); peak-goroutines = most goroutines alive beyond those before the round
// (the 64 callers and the sampler included); drain-ms = how long the
// dependency's work went on after the last caller had its answer.
func BenchmarkStall(b *testing.B) {
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) {
			do := im.new(stallSpec)
			var sum roundResult
			var peakInflight, peakG int64
			before := goroutinesCreated()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := runStallRound(do, im.turnedAway)
				sum.calls += r.calls
				sum.accepted += r.accepted
				sum.rejected += r.rejected
				sum.wall += r.wall
				sum.drain += r.drain
				peakInflight = max(peakInflight, r.peakInflight)
				peakG = max(peakG, r.peakG)
			}
			b.StopTimer()
			created := goroutinesCreated() - before
			n := float64(b.N)
			b.ReportMetric(float64(sum.accepted)/n, "accepted/op")
			b.ReportMetric(float64(sum.rejected)/n, "rejected/op")
			if lost := sum.calls - sum.accepted - sum.rejected; lost != 0 {
				// Neither reached the dependency nor said it was turned
				// away (e.g. timed out before its goroutine ran it).
				b.ReportMetric(float64(lost)/n, "other/op")
			}
			b.ReportMetric(float64(sum.wall)/float64(time.Millisecond)/n, "wall-ms/op")
			b.ReportMetric(float64(sum.drain)/float64(time.Millisecond)/n, "drain-ms/op")
			b.ReportMetric(float64(peakInflight), "peak-inflight")
			b.ReportMetric(float64(peakG), "peak-goroutines")
			// The round's own goroutines (callers, sampler) are subtracted.
			b.ReportMetric((float64(created)-n*(stallCallers+1))/float64(sum.calls), "goroutines/call")
		})
	}
}
