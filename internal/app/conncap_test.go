package app

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/config"
)

// TestRaisedBulkheadIsNotHeldByThePool: after an admin PATCH raises a
// downstream's max_concurrent past its start-up size, that many calls reach
// the service at once; none waits for a connection. Failed before: the
// client's pool was capped at twice the start-up bulkhead, so the calls
// past it waited inside the transport and timed out unsent. Each call may
// take 1.3s (of the calls' 1.4s) to be sent, so that a call that starts
// late on a loaded machine still reaches the service before its sub-budget
// ends.
func TestRaisedBulkheadIsNotHeldByThePool(t *testing.T) {
	const token, calls = "s3cret-admin-token", 6
	s, _ := startService(t, []string{"--admin-addr", "127.0.0.1:0", "--admin-token", token}, func(c *config.Serve) {
		c.Dependencies.Update("inventory", func(d *config.Dependency) { d.Bulkhead.MaxConcurrent, d.Timeout = 1, 1300*time.Millisecond })
	})
	if a := s.admin("PATCH", "/admin/dependencies/inventory", `{"bulkhead":{"max_concurrent":6}}`, token); a.status != http.StatusOK {
		t.Fatalf("patch: %d %v", a.status, a.body)
	}
	s.fault("inventory", `{"hang":true}`)
	before := s.simRequests()["inventory"]
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			if a := s.get(fmt.Sprintf("/v1/orders/o-%d", 700+i)); a.status != http.StatusOK {
				t.Errorf("page %d: %d %v", i, a.status, a.body)
			}
		})
	}
	wg.Wait()
	if n := s.simRequests()["inventory"] - before; n != calls {
		t.Fatalf("inventory received %v of %d concurrent calls: the pool held the rest back", n, calls)
	}
}
