package cache

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"
)

// relaxed gives cfg generous timeouts where it sets none. The production
// defaults (a 100ms socket timeout, 200ms per write) are for a real Redis;
// tests run under -race on shared, busy machines, where they would turn
// scheduling delays into flaky failures. Tests about timeouts set their own.
func relaxed(cfg Config) Config {
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Pool.DialTimeout == 0 {
		cfg.Pool.DialTimeout = 5 * time.Second
	}
	if cfg.Pool.ReadTimeout == 0 {
		cfg.Pool.ReadTimeout = 5 * time.Second
	}
	if cfg.Pool.WriteTimeout == 0 {
		cfg.Pool.WriteTimeout = 5 * time.Second
	}
	return cfg
}

// mustOpen opens a store with relaxed timeouts and closes it when the test
// ends.
func mustOpen(tb testing.TB, cfg Config, opts ...Option) *Store {
	tb.Helper()
	s, err := Open(context.Background(), relaxed(cfg), nil, opts...)
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

// mustFlush waits for the writers, failing the test after a few seconds.
func mustFlush(tb testing.TB, s *Store) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
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
