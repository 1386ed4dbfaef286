package cache

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/orderagg/orderagg/build/testenv"
	"github.com/orderagg/orderagg/internal/orderdetail"
)

// realRedisEnv names a Redis to run the store's contract against, e.g.
// ORDERAGG_TEST_REDIS_URL=redis://127.0.0.1:6379/15. The other tests use the
// embedded server; this one checks that the script and the schema behave the
// same on a real Redis (whose Lua returns TYPE as a status table, for one).
// `make test` starts a redis-server for it (build/with-redis.sh).
const realRedisEnv = "ORDERAGG_TEST_REDIS_URL"

func TestAgainstRealRedis(t *testing.T) {
	url := os.Getenv(realRedisEnv)
	if url == "" {
		// CI runs make test, which always sets it: a skip there would be a
		// real-Redis check that silently never runs.
		testenv.Missing(t, "%s not set: run the tests through `make test` (build/with-redis.sh starts a redis-server)", realRedisEnv)
	}
	// A prefix of its own, so runs never see each other's keys; every key
	// written carries a TTL of a minute at most.
	prefix := "orderagg:test:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s := mustOpen(t, Config{URL: url, KeyPrefix: prefix})
	ctx := context.Background()
	if err := s.Client().Ping(ctx).Err(); err != nil {
		t.Fatalf("Ping: %v", err)
	}

	t.Run("round trip", func(t *testing.T) {
		asOf := time.Now().Add(-time.Second)
		put(s, "order", "rt", entry(asOf, `{"id":"rt"}`), time.Minute)
		mustFlush(t, s)
		got := mustGet(t, s, "order", "rt")
		if string(got.Payload) != `{"id":"rt"}` || !got.AsOf.Equal(asOf.Truncate(time.Microsecond)) {
			t.Errorf("got %s at %v", got.Payload, got.AsOf)
		}
	})

	t.Run("newest wins", func(t *testing.T) {
		older := time.Now().Add(-time.Minute)
		newer := older.Add(time.Millisecond)
		for _, step := range []struct {
			e    orderdetail.CacheEntry
			want string
		}{
			{entry(newer, `"new"`), `"new"`},
			{entry(older, `"old"`), `"new"`},  // older arrives later
			{entry(newer, `"same"`), `"new"`}, // equal as_of
			{entry(newer.Add(time.Microsecond), `"newest"`), `"newest"`},
		} {
			put(s, "inventory", "nw", step.e, time.Minute)
			mustFlush(t, s)
			if got := mustGet(t, s, "inventory", "nw"); string(got.Payload) != step.want {
				t.Errorf("after %s: got %s, want %s", step.e.Payload, got.Payload, step.want)
			}
		}
	})

	t.Run("corrupt value heals", func(t *testing.T) {
		k := prefix + ":coupon:bad" // the documented key
		if err := s.Client().Set(ctx, k, "garbage", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		before := s.Stats().Corrupt
		if _, err := s.Get(ctx, "coupon", "bad"); !errors.Is(err, orderdetail.ErrCacheMiss) {
			t.Fatalf("Get: %v, want ErrCacheMiss", err)
		}
		if s.Stats().Corrupt != before+1 {
			t.Error("corrupt value not counted")
		}
		put(s, "coupon", "bad", entry(time.Now(), `{"items":[]}`), time.Minute)
		mustFlush(t, s)
		mustGet(t, s, "coupon", "bad")
	})

	t.Run("ttl", func(t *testing.T) {
		put(s, "logistics", "ttl", entry(time.Now(), `{}`), 20*time.Millisecond)
		mustFlush(t, s)
		deadline, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			_, err := s.Get(deadline, "logistics", "ttl")
			if errors.Is(err, orderdetail.ErrCacheMiss) {
				break
			}
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			select {
			case <-tick.C:
			case <-deadline.Done():
				t.Fatal("entry still served 5s after a 20ms TTL")
			}
		}
	})

	if st := s.Stats(); st.WriteErrors != 0 || st.ReadErrors != 0 {
		t.Errorf("Stats = %+v, want no errors", st)
	}
}
