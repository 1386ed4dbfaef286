package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

func entry(asOf time.Time, payload string) orderdetail.CacheEntry {
	return orderdetail.CacheEntry{AsOf: asOf, Payload: []byte(payload)}
}

func mustGet(t *testing.T, s *Store, dep, id string) orderdetail.CacheEntry {
	t.Helper()
	e, err := s.Get(context.Background(), dep, id)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", dep, id, err)
	}
	return e
}

func TestPutGetRoundTrip(t *testing.T) {
	s := mustOpen(t, Config{})
	if s.Topology() != TopologyEmbedded {
		t.Fatalf("Topology = %q, want embedded", s.Topology())
	}
	asOf := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	payload := `{"status":"IN_TRANSIT","eta":"2025-03-02"}`
	s.Put("logistics", "o-1001", entry(asOf, payload), time.Minute)
	mustFlush(t, s)

	got := mustGet(t, s, "logistics", "o-1001")
	if string(got.Payload) != payload {
		t.Errorf("Payload = %s, want %s", got.Payload, payload)
	}
	// Stored at microsecond precision.
	if want := asOf.Truncate(time.Microsecond); !got.AsOf.Equal(want) {
		t.Errorf("AsOf = %v, want %v", got.AsOf, want)
	}
	if _, err := s.Get(context.Background(), "logistics", "o-other"); !errors.Is(err, orderdetail.ErrCacheMiss) || errors.Is(err, orderdetail.ErrCacheCorrupt) {
		t.Errorf("Get of another order: err = %v, want ErrCacheMiss (absent, not corrupt)", err)
	}
	if _, err := s.Get(context.Background(), "coupon", "o-1001"); !errors.Is(err, orderdetail.ErrCacheMiss) {
		t.Errorf("Get of another dependency: err = %v, want ErrCacheMiss", err)
	}

	st := s.Stats()
	if st.WritesOK != 1 || st.Hits != 1 || st.Misses != 2 || st.Corrupt != 0 || st.ReadErrors != 0 {
		t.Errorf("Stats = %+v", st)
	}
	if st.QueueCapacity != DefaultWriteQueue || st.Queued != 0 {
		t.Errorf("queue = %d/%d, want 0/%d", st.Queued, st.QueueCapacity, DefaultWriteQueue)
	}

	// The key schema is part of the contract with other instances.
	n, err := s.Client().Exists(context.Background(), "orderagg:v1:lastgood:logistics:o-1001").Result()
	if err != nil || n != 1 {
		t.Errorf("documented key: exists = %d, %v", n, err)
	}
}

func TestNewestWins(t *testing.T) {
	older := time.Now().Add(-time.Minute)
	newer := older.Add(time.Second)

	tests := []struct {
		name        string
		first       orderdetail.CacheEntry
		second      orderdetail.CacheEntry
		want        string
		wantOK      uint64
		wantSkipped uint64
	}{
		{"older then newer", entry(older, `"old"`), entry(newer, `"new"`), `"new"`, 2, 0},
		{"newer then older", entry(newer, `"new"`), entry(older, `"old"`), `"new"`, 1, 1},
		{"equal as_of keeps the first", entry(older, `"first"`), entry(older, `"second"`), `"first"`, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustOpen(t, Config{})
			// Flush between the two, so they reach Redis in this order.
			s.Put("inventory", "o-1", tt.first, time.Minute)
			mustFlush(t, s)
			s.Put("inventory", "o-1", tt.second, time.Minute)
			mustFlush(t, s)

			if got := mustGet(t, s, "inventory", "o-1"); string(got.Payload) != tt.want {
				t.Errorf("Payload = %s, want %s", got.Payload, tt.want)
			}
			st := s.Stats()
			if st.WritesOK != tt.wantOK || st.WritesStale != tt.wantSkipped {
				t.Errorf("WritesOK = %d, WritesStale = %d; want %d, %d", st.WritesOK, st.WritesStale, tt.wantOK, tt.wantSkipped)
			}
		})
	}
}

// Many writers racing on one key: whatever the order of arrival, the newest
// as_of is what stays.
func TestNewestWinsUnderConcurrency(t *testing.T) {
	var logs syncBuffer
	s, err := Open(context.Background(), relaxed(Config{Writers: 8, ErrorLogInterval: time.Nanosecond}), bufferLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	base := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			s.Put("coupon", "o-7", entry(base.Add(time.Duration(i)*time.Millisecond), strconv.Itoa(i)), time.Minute)
		})
	}
	wg.Wait()
	mustFlush(t, s)
	if got := mustGet(t, s, "coupon", "o-7"); string(got.Payload) != "199" {
		t.Errorf("Payload = %s, want 199", got.Payload)
	}
	st := s.Stats()
	if st.WritesOK+st.WritesStale+st.WritesDropped != 200 || st.WriteErrors != 0 {
		t.Errorf("Stats = %+v, want 200 writes settled without errors; logs:\n%s", st, logs.String())
	}
}

func TestTTLExpiry(t *testing.T) {
	s := mustOpen(t, Config{})
	s.Put("order", "o-9", entry(time.Now(), `{"id":"o-9"}`), 10*time.Second)
	mustFlush(t, s)
	mustGet(t, s, "order", "o-9")

	// The key carries the TTL Put was given (rounded to whole milliseconds).
	ttl, err := s.Client().PTTL(context.Background(), key(DefaultKeyPrefix, "order", "o-9")).Result()
	if err != nil || ttl <= 0 || ttl > 10*time.Second {
		t.Errorf("PTTL = %v, %v; want (0, 10s]", ttl, err)
	}

	s.emb.srv.FastForward(11 * time.Second)
	if _, err := s.Get(context.Background(), "order", "o-9"); !errors.Is(err, orderdetail.ErrCacheMiss) {
		t.Fatalf("after TTL: err = %v, want ErrCacheMiss", err)
	}
	if st := s.Stats(); st.Misses != 1 || st.Corrupt != 0 {
		t.Errorf("Stats = %+v, want one plain miss", st)
	}
}

// The embedded server's own clock goroutine makes TTLs expire in real time.
func TestEmbeddedClockAdvances(t *testing.T) {
	s := mustOpen(t, Config{})
	s.Put("order", "o-clock", entry(time.Now(), `1`), time.Millisecond)
	mustFlush(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := s.Get(ctx, "order", "o-clock"); errors.Is(err, orderdetail.ErrCacheMiss) {
			return
		} else if err != nil {
			t.Fatalf("Get: %v", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("entry with a 1ms TTL still served after 5s")
		}
	}
}

func TestCorruptValues(t *testing.T) {
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10)
	now := strconv.FormatInt(time.Now().UnixMicro(), 10)
	tests := []struct {
		name  string
		write func(ctx context.Context, s *Store, k string) error
	}{
		{"not a hash", func(ctx context.Context, s *Store, k string) error {
			return s.Client().Set(ctx, k, "garbage", 0).Err()
		}},
		{"unknown version", func(ctx context.Context, s *Store, k string) error {
			return s.Client().HSet(ctx, k, "v", "99", "as_of", now, "val", `{}`).Err()
		}},
		{"as_of not a number", func(ctx context.Context, s *Store, k string) error {
			return s.Client().HSet(ctx, k, "v", "1", "as_of", "yesterday", "val", `{}`).Err()
		}},
		{"as_of in the future", func(ctx context.Context, s *Store, k string) error {
			return s.Client().HSet(ctx, k, "v", "1", "as_of", future, "val", `{}`).Err()
		}},
		{"payload not JSON", func(ctx context.Context, s *Store, k string) error {
			return s.Client().HSet(ctx, k, "v", "1", "as_of", now, "val", `{"truncated":`).Err()
		}},
		{"field missing", func(ctx context.Context, s *Store, k string) error {
			return s.Client().HSet(ctx, k, "v", "1", "val", `{}`).Err()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				events []Event
			)
			s := mustOpen(t, Config{}, WithListener(func(ev Event, dep string) {
				if dep != "coupon" {
					t.Errorf("listener dep = %q", dep)
				}
				mu.Lock()
				events = append(events, ev)
				mu.Unlock()
			}))
			ctx := context.Background()
			k := key(DefaultKeyPrefix, "coupon", "o-5")
			if err := tt.write(ctx, s, k); err != nil {
				t.Fatalf("raw write: %v", err)
			}
			if _, err := s.Get(ctx, "coupon", "o-5"); !errors.Is(err, orderdetail.ErrCacheCorrupt) || !errors.Is(err, orderdetail.ErrCacheMiss) {
				t.Fatalf("Get: err = %v, want ErrCacheCorrupt, a miss", err)
			}
			if st := s.Stats(); st.Corrupt != 1 || st.Misses != 0 || st.ReadErrors != 0 {
				t.Errorf("Stats = %+v, want Corrupt 1", st)
			}

			// The next newer write heals the key, whatever was there.
			s.Put("coupon", "o-5", entry(time.Now(), `{"items":[]}`), time.Minute)
			mustFlush(t, s)
			if got := mustGet(t, s, "coupon", "o-5"); string(got.Payload) != `{"items":[]}` {
				t.Errorf("after healing write: Payload = %s", got.Payload)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []Event{EventCorrupt, EventWriteOK, EventHit}
			if len(events) != len(want) {
				t.Fatalf("events = %v, want %v", events, want)
			}
			for i := range want {
				if events[i] != want[i] {
					t.Errorf("events = %v, want %v", events, want)
				}
			}
		})
	}
}

// A value written by a newer schema version is not served, but its as_of
// still orders writes: an older entry must not replace it.
func TestNewerVersionStillOrdersWrites(t *testing.T) {
	s := mustOpen(t, Config{})
	ctx := context.Background()
	k := key(DefaultKeyPrefix, "order", "o-2")
	newer := time.Now().Add(-time.Second)
	if err := s.Client().HSet(ctx, k, "v", "2", "as_of", newer.UnixMicro(), "val", `{}`, "extra", "x").Err(); err != nil {
		t.Fatal(err)
	}
	s.Put("order", "o-2", entry(newer.Add(-time.Second), `{}`), time.Minute)
	mustFlush(t, s)
	if v, _ := s.Client().HGet(ctx, k, "v").Result(); v != "2" {
		t.Errorf("stored version = %q, want 2 (older write must not replace it)", v)
	}
	s.Put("order", "o-2", entry(newer.Add(time.Millisecond), `{"id":"o-2"}`), time.Minute)
	mustFlush(t, s)
	fields, err := s.Client().HGetAll(ctx, k).Result()
	if err != nil {
		t.Fatal(err)
	}
	if fields["v"] != "1" || fields["val"] != `{"id":"o-2"}` || len(fields) != 3 {
		t.Errorf("hash after newer write = %v, want exactly v=1, as_of, val", fields)
	}
}

func TestPutIgnoresUnservableEntries(t *testing.T) {
	s := mustOpen(t, Config{})
	s.Put("order", "o-1", entry(time.Now(), `{}`), 0)
	s.Put("order", "o-1", entry(time.Now(), `{}`), -time.Second)
	s.Put("order", "o-1", entry(time.Time{}, `{}`), time.Minute)
	s.Put("order", "o-1", orderdetail.CacheEntry{AsOf: time.Now()}, time.Minute)
	mustFlush(t, s)
	if st := s.Stats(); st != (Stats{QueueCapacity: DefaultWriteQueue}) {
		t.Errorf("Stats = %+v, want nothing counted", st)
	}
}

func TestGetHonoursDoneContext(t *testing.T) {
	s := mustOpen(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Get(ctx, "order", "o-1")
	if !errors.Is(err, context.Canceled) || errors.Is(err, orderdetail.ErrCacheMiss) {
		t.Errorf("err = %v, want context.Canceled and not a miss", err)
	}
	if st := s.Stats(); st.ReadErrors != 1 {
		t.Errorf("ReadErrors = %d, want 1", st.ReadErrors)
	}
}

func TestCloseDrainsQueue(t *testing.T) {
	s, err := Open(context.Background(), relaxed(Config{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		s.Put("order", "o-"+strconv.Itoa(i), entry(time.Now(), `{}`), time.Minute)
	}
	// Close drains before it stops the embedded server: every entry is
	// written, none dropped.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := s.Stats(); st.WritesOK != n || st.WritesDropped != 0 {
		t.Errorf("Stats = %+v, want %d written", st, n)
	}
	// After Close: Put drops and counts, Flush says closed, Close is idempotent.
	s.Put("order", "late", entry(time.Now(), `{}`), time.Minute)
	if st := s.Stats(); st.WritesDropped != 1 {
		t.Errorf("WritesDropped after Close = %d, want 1", st.WritesDropped)
	}
	if err := s.Flush(ctx); err != nil && !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestWithHookSeesCommands(t *testing.T) {
	h := &countingHook{}
	s := mustOpen(t, Config{}, WithHook(h))
	before := h.count()
	if before == 0 {
		t.Error("hook did not see the start-up probe")
	}
	if _, err := s.Get(context.Background(), "order", "x"); !errors.Is(err, orderdetail.ErrCacheMiss) {
		t.Fatal(err)
	}
	if h.count() != before+1 {
		t.Errorf("hook saw %d commands for one Get", h.count()-before)
	}
}

func TestEventString(t *testing.T) {
	for ev := range numEvents {
		if ev.String() == "" || ev.String() == "unknown" {
			t.Errorf("Event(%d) has no name", ev)
		}
	}
	if numEvents.String() != "unknown" {
		t.Errorf("out of range event = %q", numEvents.String())
	}
}

func TestLogLimiter(t *testing.T) {
	l := logLimiter{every: 10 * time.Second}
	t0 := time.Unix(1_700_000_000, 0)
	if ok, n := l.allow(t0); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for i := range 5 {
		if ok, _ := l.allow(t0.Add(time.Duration(i) * time.Second)); ok {
			t.Fatalf("allowed within the interval at +%ds", i)
		}
	}
	if ok, n := l.allow(t0.Add(10 * time.Second)); !ok || n != 5 {
		t.Errorf("after the interval: ok=%v suppressed=%d, want true 5", ok, n)
	}
}

// The future-skew bound is measured on the store's clock.
func TestFutureSkewUsesClock(t *testing.T) {
	now := time.Now().Add(24 * time.Hour) // a clock far from the real one
	s := mustOpen(t, Config{MaxFutureSkew: time.Minute}, withClock(func() time.Time { return now }))
	ctx := context.Background()
	for _, tt := range []struct {
		id      string
		asOf    time.Time
		wantHit bool
	}{
		{"within-skew", now.Add(59 * time.Second), true},
		{"beyond-skew", now.Add(61 * time.Second), false},
	} {
		k := key(DefaultKeyPrefix, "order", tt.id)
		if err := s.Client().HSet(ctx, k, "v", "1", "as_of", tt.asOf.UnixMicro(), "val", `{}`).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get(ctx, "order", tt.id)
		if hit := err == nil; hit != tt.wantHit {
			t.Errorf("%s: Get err = %v, want hit %v", tt.id, err, tt.wantHit)
		}
	}
	if st := s.Stats(); st.Hits != 1 || st.Corrupt != 1 {
		t.Errorf("Stats = %+v, want one hit and one corrupt", st)
	}
}

// Writes are pipelined with EVALSHA; a Redis that has forgotten the script
// (restarted, or a new cluster node) must still get every write.
func TestWritesSurviveAScriptFlush(t *testing.T) {
	s := mustOpen(t, Config{})
	asOf := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	s.Put("order", "o-1", entry(asOf, `{"id":"o-1"}`), time.Minute)
	mustFlush(t, s)
	if err := s.Client().ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 100 { // more than one batch
		s.Put("order", fmt.Sprintf("o-%d", i+2), entry(asOf, `{"id":"x"}`), time.Minute)
	}
	mustFlush(t, s)
	if st := s.Stats(); st.WritesOK != 101 || st.WriteErrors != 0 {
		t.Fatalf("Stats = %+v, want 101 writes and no errors", st)
	}
	mustGet(t, s, "order", "o-101")
}
