package cache

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// The invariant these tests hold the Store to: after a live answer, the
// stored copy is that answer or a newer one, within the write-behind delay
// (for a dropped write: once the next live answer is written).

// gated is a backend whose writes the test can stall (hold) or fail.
type gated struct {
	backend
	hold    sync.RWMutex  // Lock stalls the writes that begin after it
	entered chan struct{} // one for each write, as it begins
	fail    atomic.Bool
}

func (g *gated) put(ctx context.Context, req writeReq, now time.Time) (bool, error) {
	g.entered <- struct{}{}
	g.hold.RLock()
	defer g.hold.RUnlock()
	if g.fail.Load() {
		return false, errors.New("injected failure")
	}
	return g.backend.put(ctx, req, now)
}

// gatedStore is a Store on a gated in-memory backend.
func gatedStore(t *testing.T, cfg Config) (*Store, *gated) {
	cfg = cfg.withDefaults()
	g := &gated{backend: newMemory(cfg.MemoryEntries), entered: make(chan struct{}, 1024)}
	s := newStore(cfg, g, nil, slog.New(slog.DiscardHandler), nil)
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, g
}

func payloadOf(t *testing.T, s *Store, dep, id string) string {
	t.Helper()
	return string(mustGet(t, s, dep, id).Payload)
}

// A downstream whose answer changes between requests: every change is
// written at once, an identical answer is not rewritten until its copy is a
// quarter of its ttl old, and a change back is written too.
func TestContentChangesBetweenRequests(t *testing.T) {
	backends(t, Config{}, func(t *testing.T, s *Store) {
		const ttl = time.Minute
		t0 := time.Now().Add(-time.Hour)
		steps := []struct {
			at      time.Duration
			payload string
			written bool
		}{
			{0, `"IN_TRANSIT"`, true},
			{time.Second, `"IN_TRANSIT"`, false}, // identical, 1s old copy
			{2 * time.Second, `"DELIVERED"`, true},
			{3 * time.Second, `"IN_TRANSIT"`, true}, // changed back
			{3*time.Second + ttl/4 - time.Microsecond, `"IN_TRANSIT"`, false},
			{3*time.Second + ttl/4, `"IN_TRANSIT"`, true}, // a quarter of its ttl old: refreshed
		}
		var ok uint64
		for _, st := range steps {
			put(s, "logistics", "o-1", entry(t0.Add(st.at), st.payload), ttl)
			mustFlush(t, s)
			if st.written {
				ok++
			}
			got := mustGet(t, s, "logistics", "o-1")
			if string(got.Payload) != st.payload {
				t.Errorf("after the answer at +%v: stored %s, want %s", st.at, got.Payload, st.payload)
			}
			if n := s.Stats().WritesOK; n != ok {
				t.Errorf("after the answer at +%v: %d writes, want %d", st.at, n, ok)
			}
		}
	})
}

// The write queue full: the dropped answer is not marked stored, so the next
// live answer with the same content is written.
func TestDroppedWriteIsWrittenByTheNextAnswer(t *testing.T) {
	s, g := gatedStore(t, Config{WriteQueue: 1, Writers: 1})
	t0 := time.Now().Add(-time.Hour)
	g.hold.Lock()
	put(s, "logistics", "o-1", entry(t0, `"IN_TRANSIT"`), time.Minute)
	<-g.entered                                                        // the writer holds it
	put(s, "logistics", "o-2", entry(t0, `"IN_TRANSIT"`), time.Minute) // fills the queue
	put(s, "logistics", "o-1", entry(t0.Add(time.Second), `"DELIVERED"`), time.Minute)
	if st := s.Stats(); st.WritesDropped != 1 {
		t.Fatalf("Stats = %+v, want the DELIVERED answer dropped", st)
	}
	g.hold.Unlock()
	mustFlush(t, s)
	if got := payloadOf(t, s, "logistics", "o-1"); got != `"IN_TRANSIT"` {
		t.Fatalf("stored %s before the next answer", got)
	}
	put(s, "logistics", "o-1", entry(t0.Add(2*time.Second), `"DELIVERED"`), time.Minute)
	mustFlush(t, s)
	if got := payloadOf(t, s, "logistics", "o-1"); got != `"DELIVERED"` {
		t.Errorf("stored %s after the next live answer, want DELIVERED", got)
	}
}

// A change is in flight when the answer changes back to the copy confirmed
// before it: that answer is written, since the change may land first.
func TestChangeBackWhileAChangeIsInFlight(t *testing.T) {
	s, g := gatedStore(t, Config{Writers: 1})
	t0 := time.Now().Add(-time.Hour)
	put(s, "order", "o-1", entry(t0, `"A"`), time.Hour)
	<-g.entered
	mustFlush(t, s)
	g.hold.Lock()
	put(s, "order", "o-1", entry(t0.Add(time.Second), `"B"`), time.Hour)
	<-g.entered
	put(s, "order", "o-1", entry(t0.Add(2*time.Second), `"A"`), time.Hour)
	g.hold.Unlock()
	mustFlush(t, s)
	if got := payloadOf(t, s, "order", "o-1"); got != `"A"` {
		t.Errorf("stored %s, want the newest answer A", got)
	}
}

// A failed write, or one refused because a newer copy is stored (another
// instance's), leaves the key unmarked: the next identical answer is written.
func TestFailedOrRefusedWriteIsRewritten(t *testing.T) {
	s, g := gatedStore(t, Config{})
	t0 := time.Now().Add(-time.Hour)
	g.fail.Store(true)
	put(s, "coupon", "o-1", entry(t0, `"A"`), time.Hour)
	<-g.entered
	mustFlush(t, s)
	g.fail.Store(false)
	put(s, "coupon", "o-1", entry(t0.Add(time.Second), `"A"`), time.Hour)
	<-g.entered
	mustFlush(t, s)
	if st := s.Stats(); st.WriteErrors != 1 || st.WritesOK != 1 || payloadOf(t, s, "coupon", "o-1") != `"A"` {
		t.Fatalf("Stats = %+v after a failed write and its retry", st)
	}

	// Another instance stores B at +10s; this one's C at +5s is refused, and
	// its C at +11s is written although identical to the C it sent.
	_, _ = g.backend.put(context.Background(), writeReq{k: entryKey{"coupon", "o-1"}, e: entry(t0.Add(10*time.Second), `"B"`), ttl: time.Hour}, time.Now())
	put(s, "coupon", "o-1", entry(t0.Add(5*time.Second), `"C"`), time.Hour)
	<-g.entered
	mustFlush(t, s)
	put(s, "coupon", "o-1", entry(t0.Add(11*time.Second), `"C"`), time.Hour)
	<-g.entered
	mustFlush(t, s)
	if st := s.Stats(); st.WritesStale != 1 || payloadOf(t, s, "coupon", "o-1") != `"C"` {
		t.Errorf("Stats = %+v, stored %s; want the refused C rewritten", st, payloadOf(t, s, "coupon", "o-1"))
	}
}

// The suppression holds per (dependency, order): another key's identical
// payload is written.
func TestIdenticalPayloadOfAnotherKeyIsWritten(t *testing.T) {
	s := mustOpen(t, Config{})
	now := time.Now()
	for _, k := range []entryKey{{"order", "o-1"}, {"order", "o-2"}, {"coupon", "o-1"}} {
		put(s, k.dep, k.orderID, entry(now, `{}`), time.Minute)
	}
	mustFlush(t, s)
	if st := s.Stats(); st.WritesOK != 3 {
		t.Errorf("Stats = %+v, want 3 writes", st)
	}
	if _, err := s.Get(context.Background(), "order", "o-3"); !errors.Is(err, orderdetail.ErrCacheMiss) {
		t.Errorf("Get of an unwritten key: %v", err)
	}
}
