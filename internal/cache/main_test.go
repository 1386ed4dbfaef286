package cache

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go-redis starts this after PoolSize failed dials to probe the
		// server once a second; it sees the pool closed and exits on its
		// next tick, but nothing outside go-redis can wait for it.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
	)
}
