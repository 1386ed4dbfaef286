package cache

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// relaxed adds generous go-redis timeouts to a redis:// URL: the
// production defaults (100ms socket reads) are for a real Redis nearby, and
// tests run under -race on shared, busy machines. Tests about timeouts set
// their own in the URL's query.
func relaxed(rawURL string) string {
	return rawURL + "?dial_timeout=5s&read_timeout=5s&write_timeout=5s"
}

// mustOpen opens a store with a generous WriteTimeout and closes it when the
// test ends.
func mustOpen(tb testing.TB, cfg Config, opts ...Option) *Store {
	tb.Helper()
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	s, err := Open(context.Background(), cfg, nil, opts...)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// onMiniredis opens a store on a fresh miniredis (which runs the script in
// its own Lua interpreter), returned for raw access and its clock.
func onMiniredis(tb testing.TB, cfg Config, opts ...Option) (*Store, *miniredis.Miniredis) {
	tb.Helper()
	mr := miniredis.RunT(tb)
	cfg.URL = relaxed("redis://" + mr.Addr())
	return mustOpen(tb, cfg, opts...), mr
}

// backends runs test once on the in-memory store and once on miniredis.
func backends(t *testing.T, cfg Config, test func(t *testing.T, s *Store)) {
	t.Run("memory", func(t *testing.T) { test(t, mustOpen(t, cfg)) })
	t.Run("redis", func(t *testing.T) {
		s, _ := onMiniredis(t, cfg)
		test(t, s)
	})
}

// mustFlush waits for the writers, failing the test after a few seconds.
func mustFlush(tb testing.TB, s *Store) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := flush(ctx, s); err != nil {
		tb.Fatalf("Flush: %v", err)
	}
}

// frozenRedis accepts connections and never answers: a Redis that hangs.
// It returns the redis:// URL and stops when the test ends.
func frozenRedis(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(io.Discard, c) // read requests, answer none
			}()
		}
	}()
	tb.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "redis://" + ln.Addr().String()
}

// refusedAddr is a loopback address nothing listens on.
func refusedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func bufferLogger(b *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// miniredisAddr is the address of a fresh miniredis, stopped when the test ends.
func miniredisAddr(tb testing.TB) string { return miniredis.RunT(tb).Addr() }

// clock is a settable clock for WithClock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// flush waits until every entry accepted so far has settled, or ctx ends.
func flush(ctx context.Context, s *Store) error {
	for s.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cache.flush: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
