package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The whole stack on one private network: sim, Redis and the service
// containers; one order through the service's public API, served by the sim
// container (not the embedded simulators) and remembered in the Redis
// container (not the embedded cache).
func TestServiceSmoke(t *testing.T) {
	requireImages(t, images().Service, images().Redis)
	nw := newNetwork(t)
	_, redisAddr := startRedis(t, nw)
	_, simURL := startSim(t, nw)
	_, base := startService(t, nw, nil)

	resp, body := get(t, base+"/v1/orders/o-1001")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/orders/o-1001 = %d, want 200; body: %s", resp.StatusCode, trimBody(body))
	}
	var got struct {
		OrderID  string `json:"order_id"`
		Degraded bool   `json:"degraded"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body is not JSON: %v; body: %s", err, trimBody(body))
	}
	if got.OrderID != "o-1001" {
		t.Fatalf("order_id = %q, want o-1001; body: %s", got.OrderID, trimBody(body))
	}
	if got.Degraded {
		t.Errorf("degraded = true with every downstream healthy; body: %s", trimBody(body))
	}

	// The sim container saw the calls.
	resp, body = get(t, simURL+"/stats")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET sim /stats = %d; body: %s", resp.StatusCode, trimBody(body))
	}
	var stats map[string]struct {
		Requests int `json:"requests"`
	}
	if err := json.Unmarshal(body, &stats); err != nil {
		t.Fatalf("sim /stats is not JSON: %v; body: %s", err, trimBody(body))
	}
	for _, svc := range []string{"order", "inventory", "coupon", "logistics"} {
		if stats[svc].Requests < 1 {
			t.Errorf("sim %s requests = %d, want ≥ 1; /stats: %s", svc, stats[svc].Requests, trimBody(body))
		}
	}

	// The last-good answers reached the Redis container (written after the
	// response, so poll briefly).
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys int64
	for {
		n, err := rdb.DBSize(ctx).Result()
		if err == nil && n > 0 {
			keys = n
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no last-good entry in Redis 10s after a live answer (DBSIZE = %d, err = %v)", n, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("Redis holds %d keys after one order", keys)

	resp, body = get(t, base+"/healthz")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz = %d, want 200; body: %s", resp.StatusCode, trimBody(body))
	}
}
