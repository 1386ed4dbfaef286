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

func put(s *Store, dep, id string, e orderdetail.CacheEntry, ttl time.Duration) {
	s.PutContext(context.Background(), dep, id, e, ttl)
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
	backends(t, Config{}, func(t *testing.T, s *Store) {
		asOf := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
		payload := `{"status":"IN_TRANSIT","eta":"2025-03-02"}`
		put(s, "logistics", "o-1001", entry(asOf, payload), time.Minute)
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
	})
}

// The key schema is part of the contract with other instances.
func TestDocumentedKey(t *testing.T) {
	s, mr := onMiniredis(t, Config{})
	put(s, "logistics", "o-1001", entry(time.Now(), `{}`), time.Minute)
	mustFlush(t, s)
	if !mr.Exists("orderagg:v1:lastgood:logistics:o-1001") {
		t.Errorf("documented key absent; keys: %v", mr.Keys())
	}
}

func TestNewestWins(t *testing.T) {
	older := time.Now().Add(-time.Minute)
	newer := older.Add(time.Second)
	tests := []struct {
		name          string
		first, second orderdetail.CacheEntry
		want          string
		wantOK        uint64
		wantStale     uint64
	}{
		{"older then newer", entry(older, `"old"`), entry(newer, `"new"`), `"new"`, 2, 0},
		{"newer then older", entry(newer, `"new"`), entry(older, `"old"`), `"new"`, 1, 1},
		{"equal as_of keeps the first", entry(older, `"first"`), entry(older, `"second"`), `"first"`, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backends(t, Config{}, func(t *testing.T, s *Store) {
				// Flush between the two, so they reach the store in this order.
				put(s, "inventory", "o-1", tt.first, time.Minute)
				mustFlush(t, s)
				put(s, "inventory", "o-1", tt.second, time.Minute)
				mustFlush(t, s)
				if got := mustGet(t, s, "inventory", "o-1"); string(got.Payload) != tt.want {
					t.Errorf("Payload = %s, want %s", got.Payload, tt.want)
				}
				if st := s.Stats(); st.WritesOK != tt.wantOK || st.WritesStale != tt.wantStale {
					t.Errorf("WritesOK = %d, WritesStale = %d; want %d, %d", st.WritesOK, st.WritesStale, tt.wantOK, tt.wantStale)
				}
			})
		})
	}
}

// Many writers racing on one key: whatever the order of arrival, the newest
// as_of is what stays.
func TestNewestWinsUnderConcurrency(t *testing.T) {
	backends(t, Config{Writers: 8}, func(t *testing.T, s *Store) {
		base := time.Now().Add(-time.Hour)
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				put(s, "coupon", "o-7", entry(base.Add(time.Duration(i)*time.Millisecond), strconv.Itoa(i)), time.Minute)
			})
		}
		wg.Wait()
		mustFlush(t, s)
		if got := mustGet(t, s, "coupon", "o-7"); string(got.Payload) != "199" {
			t.Errorf("Payload = %s, want 199", got.Payload)
		}
		st := s.Stats()
		if st.WritesOK+st.WritesStale+st.WritesDropped != 200 || st.WriteErrors != 0 {
			t.Errorf("Stats = %+v, want 200 writes settled without errors", st)
		}
	})
}

func TestTTLExpiry(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		clock := newClock()
		s, mr := onMiniredis(t, Config{}, WithClock(clock.now))
		put(s, "order", "o-9", entry(clock.now(), `{"id":"o-9"}`), 10*time.Second)
		mustFlush(t, s)
		mustGet(t, s, "order", "o-9")
		if ttl := mr.TTL(Config{}.withDefaults().KeyPrefix + ":order:o-9"); ttl <= 0 || ttl > 10*time.Second {
			t.Errorf("TTL = %v; want (0, 10s]", ttl)
		}
		clock.advance(10*time.Second - readReuse/2) // Redis and the process agree on time
		mr.FastForward(10*time.Second - readReuse/2)
		mustGet(t, s, "order", "o-9") // kept for reuse up to the entry's TTL only
		clock.advance(readReuse / 2)
		mr.FastForward(readReuse / 2)
		if _, err := s.Get(context.Background(), "order", "o-9"); !errors.Is(err, orderdetail.ErrCacheMiss) {
			t.Fatalf("after TTL: err = %v, want ErrCacheMiss", err)
		}
	})
	t.Run("memory", func(t *testing.T) {
		clock := newClock()
		s := mustOpen(t, Config{}, WithClock(clock.now))
		put(s, "order", "o-9", entry(clock.now(), `{"id":"o-9"}`), 10*time.Second)
		mustFlush(t, s)
		clock.advance(10*time.Second - time.Millisecond)
		mustGet(t, s, "order", "o-9")
		clock.advance(time.Millisecond)
		if _, err := s.Get(context.Background(), "order", "o-9"); !errors.Is(err, orderdetail.ErrCacheMiss) {
			t.Fatalf("after TTL: err = %v, want ErrCacheMiss", err)
		}
		if st := s.Stats(); st.Misses != 1 || st.Corrupt != 0 {
			t.Errorf("Stats = %+v, want one plain miss", st)
		}
		// An expired entry no longer orders writes: an older one may take its place.
		put(s, "order", "o-9", entry(clock.now().Add(-time.Hour), `{"id":"old"}`), time.Minute)
		mustFlush(t, s)
		mustGet(t, s, "order", "o-9")
	})
}

func TestCorruptValues(t *testing.T) {
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10)
	now := strconv.FormatInt(time.Now().UnixMicro(), 10)
	const k = DefaultKeyPrefix + ":coupon:o-5"
	tests := []struct {
		name   string
		fields []string // of a hash; none: a string value
	}{
		{"not a hash", nil},
		{"unknown version", []string{"v", "99", "as_of", now, "val", `{}`}},
		{"as_of not a number", []string{"v", "1", "as_of", "yesterday", "val", `{}`}},
		{"as_of in the future", []string{"v", "1", "as_of", future, "val", `{}`}},
		{"payload not JSON", []string{"v", "1", "as_of", now, "val", `{"truncated":`}},
		{"field missing", []string{"v", "1", "val", `{}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, mr := onMiniredis(t, Config{})
			if tt.fields == nil {
				_ = mr.Set(k, "garbage")
			} else {
				mr.HSet(k, tt.fields...)
			}
			ctx := context.Background()
			if _, err := s.Get(ctx, "coupon", "o-5"); !errors.Is(err, orderdetail.ErrCacheCorrupt) || !errors.Is(err, orderdetail.ErrCacheMiss) {
				t.Fatalf("Get: err = %v, want ErrCacheCorrupt, a miss", err)
			}
			// The next write heals the key, whatever was there.
			put(s, "coupon", "o-5", entry(time.Now(), `{"items":[]}`), time.Minute)
			mustFlush(t, s)
			if got := mustGet(t, s, "coupon", "o-5"); string(got.Payload) != `{"items":[]}` {
				t.Errorf("after healing write: Payload = %s", got.Payload)
			}
			if st := s.Stats(); st != (Stats{Corrupt: 1, WritesOK: 1, Hits: 1, QueueCapacity: DefaultWriteQueue}) {
				t.Errorf("Stats = %+v, want one corrupt read, one write and one hit", st)
			}
		})
	}
}

// A value written by a newer schema version is not served, but its as_of
// still orders writes: an older entry must not replace it.
func TestNewerVersionStillOrdersWrites(t *testing.T) {
	s, mr := onMiniredis(t, Config{})
	const k = DefaultKeyPrefix + ":order:o-2"
	newer := time.Now().Add(-time.Second)
	mr.HSet(k, "v", "2", "as_of", strconv.FormatInt(newer.UnixMicro(), 10), "val", `{}`, "extra", "x")
	put(s, "order", "o-2", entry(newer.Add(-time.Second), `{}`), time.Minute)
	mustFlush(t, s)
	if v := mr.HGet(k, "v"); v != "2" {
		t.Errorf("stored version = %q, want 2 (older write must not replace it)", v)
	}
	put(s, "order", "o-2", entry(newer.Add(time.Millisecond), `{"id":"o-2"}`), time.Minute)
	mustFlush(t, s)
	if fields, _ := mr.HKeys(k); mr.HGet(k, "v") != "1" || mr.HGet(k, "val") != `{"id":"o-2"}` || len(fields) != 3 {
		t.Errorf("hash after newer write = %v, want exactly v=1, as_of, val", fields)
	}
}

func TestPutIgnoresUnservableEntries(t *testing.T) {
	s := mustOpen(t, Config{})
	put(s, "order", "o-1", entry(time.Now(), `{}`), 0)
	put(s, "order", "o-1", entry(time.Now(), `{}`), -time.Second)
	put(s, "order", "o-1", entry(time.Time{}, `{}`), time.Minute)
	put(s, "order", "o-1", orderdetail.CacheEntry{AsOf: time.Now()}, time.Minute)
	mustFlush(t, s)
	if st := s.Stats(); st != (Stats{QueueCapacity: DefaultWriteQueue}) {
		t.Errorf("Stats = %+v, want nothing counted", st)
	}
}

func TestGetHonoursDoneContext(t *testing.T) {
	backends(t, Config{}, func(t *testing.T, s *Store) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.Get(ctx, "order", "o-1")
		if !errors.Is(err, context.Canceled) || errors.Is(err, orderdetail.ErrCacheMiss) {
			t.Errorf("err = %v, want context.Canceled and not a miss", err)
		}
		if st := s.Stats(); st.ReadErrors != 1 {
			t.Errorf("ReadErrors = %d, want 1", st.ReadErrors)
		}
	})
}

func TestCloseDrainsQueue(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"memory", func(*testing.T) string { return "" }},
		{"redis", func(t *testing.T) string { return relaxed("redis://" + miniredisAddr(t)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(context.Background(), Config{URL: tc.url(t)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			const n = 50
			for i := range n {
				put(s, "order", "o-"+strconv.Itoa(i), entry(time.Now(), `{}`), time.Minute)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if st := s.Stats(); st.WritesOK != n || st.WritesDropped != 0 {
				t.Errorf("Stats = %+v, want %d written", st, n)
			}
			// After Close: PutContext drops and counts, Close is idempotent.
			put(s, "order", "late", entry(time.Now(), `{}`), time.Minute)
			if st := s.Stats(); st.WritesDropped != 1 {
				t.Errorf("WritesDropped after Close = %d, want 1", st.WritesDropped)
			}
			if err := s.Close(ctx); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

// The future-skew bound is measured on the store's clock.
func TestFutureSkewUsesClock(t *testing.T) {
	now := time.Now().Add(24 * time.Hour) // a clock far from the real one
	s, mr := onMiniredis(t, Config{}, WithClock(func() time.Time { return now }))
	for _, tt := range []struct {
		id      string
		asOf    time.Time
		wantHit bool
	}{
		{"within-skew", now.Add(maxFutureSkew - time.Second), true},
		{"beyond-skew", now.Add(maxFutureSkew + time.Second), false},
	} {
		mr.HSet(DefaultKeyPrefix+":order:"+tt.id, "v", "1", "as_of", strconv.FormatInt(tt.asOf.UnixMicro(), 10), "val", `{}`)
		_, err := s.Get(context.Background(), "order", tt.id)
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
	s, _ := onMiniredis(t, Config{})
	asOf := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	put(s, "order", "o-1", entry(asOf, `{"id":"o-1"}`), time.Minute)
	mustFlush(t, s)
	if err := s.Client().ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		put(s, "order", fmt.Sprintf("o-%d", i+2), entry(asOf, `{"id":"x"}`), time.Minute)
	}
	mustFlush(t, s)
	if st := s.Stats(); st.WritesOK != 101 || st.WriteErrors != 0 {
		t.Fatalf("Stats = %+v, want 101 writes and no errors", st)
	}
	mustGet(t, s, "order", "o-101")
}

// A servable read answers again for readReuse without a round trip; a write
// this process stores drops the reused copy at once; after readReuse, Redis
// is asked again and another writer's newer entry is seen.
func TestRedisReadsAreReused(t *testing.T) {
	clock := newClock()
	s, mr := onMiniredis(t, Config{}, WithClock(clock.now))
	const k = DefaultKeyPrefix + ":logistics:o-3"
	t0 := clock.now().Add(-time.Minute)
	put(s, "logistics", "o-3", entry(t0, `"A"`), time.Hour)
	mustFlush(t, s)
	mustGet(t, s, "logistics", "o-3")
	commands := mr.CommandCount()
	if got := mustGet(t, s, "logistics", "o-3"); string(got.Payload) != `"A"` || mr.CommandCount() != commands {
		t.Fatalf("second read: %s after %d commands, want \"A\" without a round trip", got.Payload, mr.CommandCount()-commands)
	}

	put(s, "logistics", "o-3", entry(t0.Add(time.Second), `"B"`), time.Hour) // this process's own write
	mustFlush(t, s)
	if got := mustGet(t, s, "logistics", "o-3"); string(got.Payload) != `"B"` {
		t.Fatalf("after our write: %s, want \"B\"", got.Payload)
	}

	mr.HSet(k, "as_of", strconv.FormatInt(t0.Add(2*time.Second).UnixMicro(), 10), "val", `"C"`) // another instance's
	if got := mustGet(t, s, "logistics", "o-3"); string(got.Payload) != `"B"` {
		t.Fatalf("within readReuse: %s, want the reused \"B\"", got.Payload)
	}
	clock.advance(readReuse)
	if got := mustGet(t, s, "logistics", "o-3"); string(got.Payload) != `"C"` {
		t.Fatalf("after readReuse: %s, want \"C\" from Redis", got.Payload)
	}

	put(s, "logistics", "o-3", entry(t0.Add(time.Second), `"old"`), time.Hour) // refused: Redis holds newer
	mustFlush(t, s)
	if got := mustGet(t, s, "logistics", "o-3"); string(got.Payload) != `"C"` {
		t.Fatalf("after a refused older write: %s, want \"C\"", got.Payload)
	}
}
