package integration

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis image built from Debian's package (or ORDERAGG_REDIS_IMAGE)
// answers PING and round-trips a value through go-redis from the host.
func TestRedisImageAnswersPing(t *testing.T) {
	nw := newNetwork(t)
	_, addr := startRedis(t, nw)

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pong, err := rdb.Ping(ctx).Result()
	if err != nil {
		t.Fatalf("PING %s: %v", addr, err)
	}
	if pong != "PONG" {
		t.Fatalf("PING %s = %q, want PONG", addr, pong)
	}
	if err := rdb.Set(ctx, "orderagg:integration", "ok", time.Minute).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := rdb.Get(ctx, "orderagg:integration").Result(); err != nil || got != "ok" {
		t.Fatalf("GET = %q, %v; want \"ok\"", got, err)
	}
}
