package admission

import (
	"sync"
	"testing"
)

// The limiter admits exactly n at once, refuses the next without blocking,
// and admits again once a slot is given back.
func TestLimiterAdmitsUpToN(t *testing.T) {
	l := New(3)
	for i := range 3 {
		if !l.TryAcquire() {
			t.Fatalf("request %d refused under the limit", i+1)
		}
	}
	if l.TryAcquire() {
		t.Fatal("a fourth request admitted with a limit of 3")
	}
	if l.Inflight() != 3 || l.Limit() != 3 {
		t.Fatalf("inflight %d limit %d, want 3 3", l.Inflight(), l.Limit())
	}
	l.Release()
	if !l.TryAcquire() {
		t.Fatal("refused after a release")
	}
}

// A limit of zero or less, and the zero Limiter, refuse everything.
func TestNonPositiveLimitRefuses(t *testing.T) {
	for _, l := range []*Limiter{New(0), New(-5), {}} {
		if l.TryAcquire() || l.Limit() != 0 || l.Inflight() != 0 {
			t.Fatalf("limiter of cap %d admitted or counts wrong", l.Limit())
		}
	}
}

// Releasing a slot that is not held is a bug, reported by a panic rather
// than by silently raising the limit.
func TestReleaseWithoutSlotPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Release without a slot did not panic")
		}
	}()
	New(1).Release()
}

// Under concurrent use the in-flight count never exceeds the limit and
// returns to zero.
func TestLimiterConcurrent(t *testing.T) {
	const n = 4
	l := New(n)
	var (
		mu       sync.Mutex
		now, top int
		wg       sync.WaitGroup
	)
	for range 64 {
		wg.Go(func() {
			for range 100 {
				if !l.TryAcquire() {
					continue
				}
				mu.Lock()
				now++
				top = max(top, now)
				mu.Unlock()
				mu.Lock()
				now--
				mu.Unlock()
				l.Release()
			}
		})
	}
	wg.Wait()
	if top > n || l.Inflight() != 0 {
		t.Fatalf("peak %d over limit %d, or %d still held", top, n, l.Inflight())
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	l := New(1024)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if l.TryAcquire() {
				l.Release()
			}
		}
	})
}
