package cache

import (
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// bareStore has Put's machinery and nothing else: no client, no writers.
// It isolates Put's own cost from Redis and from the writers' allocations.
func bareStore(queue int) *Store {
	return &Store{
		cfg:      Config{WriteQueue: queue}.withDefaults(),
		queue:    make(chan writeReq, queue),
		draining: make(chan struct{}),
		log:      discardLogger,
		now:      time.Now,
	}
}

// drainLike stands in for infinitely fast writers until stop is closed, and
// returns a channel closed when it has exited.
func drainLike(s *Store, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-s.queue:
				s.finishOne()
			case <-stop:
				return
			}
		}
	}()
	return done
}

func TestPutDoesNotAllocate(t *testing.T) {
	e := orderdetail.CacheEntry{AsOf: time.Now(), Payload: []byte(`{"status":"UNKNOWN"}`)}
	const runs = 500
	s := bareStore(runs + 1) // AllocsPerRun makes one extra warm-up call
	if a := testing.AllocsPerRun(runs, func() { s.Put("logistics", "o-1001", e, time.Minute) }); a != 0 {
		t.Errorf("Put (queued) allocates %.1f times", a)
	}
	// Now the queue is full: the drop path must not allocate either.
	if a := testing.AllocsPerRun(runs, func() { s.Put("logistics", "o-1001", e, time.Minute) }); a != 0 {
		t.Errorf("Put (dropped) allocates %.1f times", a)
	}
	if st := s.Stats(); st.WritesDropped != runs+1 || st.Queued != runs+1 {
		t.Errorf("Stats = %+v", st)
	}
}

func BenchmarkPut(b *testing.B) {
	e := orderdetail.CacheEntry{AsOf: time.Now(), Payload: []byte(`{"status":"IN_TRANSIT"}`)}

	b.Run("queued", func(b *testing.B) {
		s := bareStore(DefaultWriteQueue)
		stop := make(chan struct{})
		done := drainLike(s, stop)
		b.ReportAllocs()
		for b.Loop() {
			s.Put("logistics", "o-1001", e, time.Minute)
		}
		b.StopTimer()
		close(stop)
		<-done
	})

	b.Run("queue-full", func(b *testing.B) {
		s := bareStore(1)
		s.Put("logistics", "o-1001", e, time.Minute)
		b.ReportAllocs()
		for b.Loop() {
			s.Put("logistics", "o-1001", e, time.Minute)
		}
	})

	b.Run("parallel", func(b *testing.B) {
		s := bareStore(DefaultWriteQueue)
		stop := make(chan struct{})
		done := drainLike(s, stop)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s.Put("logistics", "o-1001", e, time.Minute)
			}
		})
		b.StopTimer()
		close(stop)
		<-done
	})

	// The whole path against the embedded server: Put stays cheap while real
	// writers run behind it (and drop what they cannot keep up with).
	b.Run("embedded", func(b *testing.B) {
		s := mustOpen(b, Config{})
		b.ReportAllocs()
		for b.Loop() {
			s.Put("logistics", "o-1001", e, time.Minute)
		}
		b.StopTimer()
		st := s.Stats()
		b.ReportMetric(float64(st.WritesDropped)/float64(b.N), "dropped/op")
	})
}
