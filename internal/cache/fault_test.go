package cache

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// A Redis that accepts connections and never answers: a read is bounded by
// its ctx deadline and is an error, not a miss; Put never waits, and drops
// once the queue is full.
func TestFrozenRedis(t *testing.T) {
	const writeTimeout = time.Second
	s, err := Open(context.Background(), Config{
		// Socket timeouts far above the deadlines under test, so that only
		// the contexts bound the calls.
		URL:          frozenRedis(t) + "?read_timeout=1m&write_timeout=1m",
		WriteQueue:   1,
		Writers:      1,
		WriteTimeout: writeTimeout,
	}, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	// The last subtest closes it; this is for when an earlier one fails.
	t.Cleanup(func() { _ = s.Close(context.Background()) })

	t.Run("Get is bounded by its deadline", func(t *testing.T) {
		const deadline = 50 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		_, err := s.Get(ctx, "order", "o-1")
		elapsed := time.Since(start)
		if err == nil || errors.Is(err, orderdetail.ErrCacheMiss) {
			t.Fatalf("err = %v, want a store error, not a miss", err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want it to match context.DeadlineExceeded", err)
		}
		if !strings.HasPrefix(err.Error(), "cache.get: ") {
			t.Errorf("err = %q, want the cache.get prefix", err)
		}
		// Slack for busy test machines; without the deadline it would take
		// the socket timeout, a minute.
		if elapsed > deadline+450*time.Millisecond {
			t.Errorf("Get took %v with a %v deadline", elapsed, deadline)
		}
		if st := s.Stats(); st.ReadErrors != 1 {
			t.Errorf("ReadErrors = %d, want 1", st.ReadErrors)
		}
	})

	const n = 1000 // Puts into the frozen store
	t.Run("Put never blocks and drops when full", func(t *testing.T) {
		start := time.Now()
		for i := range n {
			put(s, "order", "o-"+strconv.Itoa(i), entry(time.Now(), `{}`), time.Minute)
		}
		// The writer is stuck for a whole WriteTimeout: had a Put waited
		// for it, this would take seconds.
		if elapsed := time.Since(start); elapsed > writeTimeout/2 {
			t.Errorf("%d Puts took %v", n, elapsed)
		}
		// One entry sits with the writer, one more in the queue; the rest drop.
		if st := s.Stats(); st.WritesDropped < n-2 {
			t.Errorf("WritesDropped = %d, want at least %d", st.WritesDropped, n-2)
		}
	})

	t.Run("Close gives up draining when its ctx ends", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := s.Close(ctx)
		// The write in flight ends at its WriteTimeout at the latest: go-redis
		// bounds socket reads by deadlines, not by cancellation.
		if elapsed := time.Since(start); elapsed > writeTimeout+2*time.Second {
			t.Errorf("Close took %v", elapsed)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close: err = %v, want DeadlineExceeded (entries abandoned)", err)
		}
		st := s.Stats()
		if st.Queued != 0 {
			t.Errorf("Queued after Close = %d", st.Queued)
		}
		if settled := st.WritesOK + st.WritesStale + st.WritesDropped + st.WriteErrors; settled != n {
			t.Errorf("settled writes = %d (%+v), want all %d accounted for", settled, st, n)
		}
	})
}

// An unreachable Redis at start-up does not stop the service: Open succeeds,
// reads fail fast, writes fail and are counted, and the password never shows
// in logs or errors.
func TestUnreachableRedis(t *testing.T) {
	const password = "s3cr3t-Pa55"
	var logs syncBuffer
	s, err := Open(context.Background(), Config{
		URL: "redis://app:" + password + "@" + refusedAddr(t) + "/2",
	}, bufferLogger(&logs))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// No retries, no backoff: each read fails as fast as the dial does,
	// hence 100 of them well within a second.
	const reads = 100
	start := time.Now()
	for range reads {
		_, err = s.Get(ctx, "order", "o-1")
		if err == nil || errors.Is(err, orderdetail.ErrCacheMiss) {
			t.Fatalf("Get: err = %v, want a store error", err)
		}
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("%d Gets took %v against a refused port", reads, elapsed)
	}
	if st := s.Stats(); st.ReadErrors != reads {
		t.Errorf("ReadErrors = %d, want %d", st.ReadErrors, reads)
	}
	if err := s.Client().Ping(ctx).Err(); err == nil {
		t.Error("Ping succeeded against a refused port")
	}

	for i := range 5 {
		put(s, "order", "o-"+strconv.Itoa(i), entry(time.Now(), `{}`), time.Minute)
	}
	if err := flush(ctx, s); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if st := s.Stats(); st.WriteErrors+st.WritesDropped != 5 || st.WriteErrors == 0 {
		t.Errorf("Stats = %+v, want 5 failed or dropped writes", st)
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}

	out := logs.String()
	if strings.Contains(out, password) || strings.Contains(err.Error(), password) {
		t.Errorf("password leaked:\n%s", out)
	}
	if !strings.Contains(out, "failed its start-up ping") {
		t.Errorf("no start-up warning in logs:\n%s", out)
	}
	// Rate-limited: one line about failed writes for the five failures.
	if n := strings.Count(out, "write failed"); n != 1 {
		t.Errorf("%d write-failure lines, want 1:\n%s", n, out)
	}
}

func TestEmbeddedLogsNotDurable(t *testing.T) {
	var logs syncBuffer
	s, err := Open(context.Background(), Config{}, bufferLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "not durable") {
		t.Errorf("want a WARN saying the embedded cache is not durable, got:\n%s", out)
	}
	if strings.Contains(out, "start-up ping") {
		t.Errorf("embedded server failed its ping:\n%s", out)
	}
}

func TestOpenRejectsDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Open(ctx, Config{}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
