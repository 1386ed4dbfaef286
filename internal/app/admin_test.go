package app

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/config"
)

func (s *service) admin(method, path, body, token string) answer {
	s.t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return s.do(method, "http://"+s.addrs.Admin+path, body, h)
}

func depState(s *service, name string) map[string]any {
	for _, d := range s.get("/v1/resilience").body["dependencies"].([]any) {
		if m := d.(map[string]any); m["name"] == name {
			return m
		}
	}
	return nil
}

func TestAdminAPI(t *testing.T) {
	s, _ := startService(t, []string{"--admin-addr", "127.0.0.1:0", "--admin-token", "s3cret-admin-token"}, nil)
	if a := s.admin("GET", "/admin/dependencies", "", ""); a.status != http.StatusUnauthorized || errCode(a) != "UNAUTHORIZED" {
		t.Fatalf("no token: %d %v", a.status, a.body)
	}
	if a := s.admin("GET", "/admin/dependencies", "", "wrong"); a.status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", a.status)
	}
	a := s.admin("GET", "/admin/dependencies", "", "s3cret-admin-token")
	coupon := a.body["dependencies"].(map[string]any)["coupon"].(map[string]any)
	if coupon["timeout"] != "300ms" {
		t.Fatalf("coupon settings %v", coupon)
	}

	// A valid patch is applied and shows in /v1/resilience.
	a = s.admin("PATCH", "/admin/dependencies/coupon", `{"timeout":"250ms","breaker":{"sleep_window":"7s"}}`, "s3cret-admin-token")
	if a.status != http.StatusOK {
		t.Fatalf("patch: %d %v", a.status, a.body)
	}
	if got := depState(s, "coupon")["timeout_ms"]; got != 250.0 {
		t.Fatalf("timeout in force %v", got)
	}
	if !strings.Contains(s.logs.String(), `"msg":"settings changed"`) {
		t.Fatal("change not logged")
	}

	// Invalid patches change nothing.
	for _, body := range []string{`{"timeout":"abc"}`, `{"nope":1}`, `{"timeout":"5s"}`, `not json`, ``, `{"bulkhead":{"max_concurrent":-1}}`} {
		if a := s.admin("PATCH", "/admin/dependencies/coupon", body, "s3cret-admin-token"); a.status != http.StatusBadRequest || errCode(a) != "BAD_REQUEST" {
			t.Errorf("%q: %d %v", body, a.status, a.body)
		}
	}
	if got := depState(s, "coupon")["timeout_ms"]; got != 250.0 {
		t.Fatalf("a bad patch changed the timeout to %v", got)
	}
	if a := s.admin("PATCH", "/admin/dependencies/payments", `{"timeout":"1s"}`, "s3cret-admin-token"); a.status != http.StatusNotFound {
		t.Fatalf("unknown dependency: %d", a.status)
	}

	// Forcing the breaker.
	if a := s.admin("POST", "/admin/dependencies/logistics/breaker", `{"force":"open"}`, "s3cret-admin-token"); a.status != http.StatusOK {
		t.Fatalf("force: %d %v", a.status, a.body)
	}
	if got := depState(s, "logistics")["breaker"]; got != "FORCED_OPEN" {
		t.Fatalf("breaker %v", got)
	}
	page := s.get("/v1/orders/o-1")
	if got := sec(page, "logistics"); got["reason"] != "SHORT_CIRCUITED" {
		t.Fatalf("logistics %v", got)
	}
	if a := s.admin("POST", "/admin/dependencies/logistics/breaker", `{"force":"sideways"}`, "s3cret-admin-token"); a.status != http.StatusBadRequest {
		t.Fatalf("bad force: %d", a.status)
	}
	s.admin("POST", "/admin/dependencies/logistics/breaker", `{"force":"none"}`, "s3cret-admin-token")
	if got := depState(s, "logistics")["breaker"]; got != "CLOSED" {
		t.Fatalf("breaker %v", got)
	}
}

func TestReloadKeepsOldSettingsOnABadFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "orderagg.yaml")
	write := func(body string) {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("dependencies:\n  coupon:\n    timeout: 200ms\n")
	s, reload := startService(t, []string{"--config", file}, nil)
	if got := depState(s, "coupon")["timeout_ms"]; got != 200.0 {
		t.Fatalf("file not applied: %v", got)
	}
	write("dependencies:\n  coupon:\n    timeout: 150ms\n")
	reload <- syscall.SIGHUP
	waitUntil(t, func() bool { return depState(s, "coupon")["timeout_ms"] == 150.0 })
	write("dependencies:\n  coupon:\n    timeout: nonsense\n")
	reload <- syscall.SIGHUP
	waitUntil(t, func() bool { return strings.Contains(s.logs.String(), "config reload failed") })
	if got := depState(s, "coupon")["timeout_ms"]; got != 150.0 {
		t.Fatalf("bad file changed the settings: %v", got)
	}
}

// TestTimeoutsTheBreakerCanSee: a sub-budget at or past the calls' end
// (--deadline − --reserve) would cut a hang as the page's DEADLINE, which
// the breaker never counts. A SIGHUP reload keeps the settings in force and
// logs why; the admin PATCH answers 400 and changes nothing.
func TestTimeoutsTheBreakerCanSee(t *testing.T) {
	file := filepath.Join(t.TempDir(), "orderagg.yaml")
	write := func(body string) {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("dependencies:\n  coupon:\n    timeout: 200ms\n")
	s, reload := startService(t, []string{"--config", file, "--admin-addr", "127.0.0.1:0", "--admin-token", "s3cret-admin-token"}, nil)

	write("dependencies:\n  coupon:\n    timeout: 1450ms\n")
	reload <- syscall.SIGHUP
	waitUntil(t, func() bool { return strings.Contains(s.logs.String(), "config reload failed") })
	if !strings.Contains(s.logs.String(), "dependencies.coupon.timeout (line 3): 1.45s must be shorter than --deadline 1.5s minus --reserve 100ms = 1.4s") {
		t.Errorf("the reload's error does not name the key and the bound:\n%s", s.logs)
	}
	for _, body := range []string{`{"timeout":"1400ms"}`, `{"timeout":"auto","timeout_max":"1450ms"}`} {
		a := s.admin("PATCH", "/admin/dependencies/coupon", body, "s3cret-admin-token")
		if msg := fmt.Sprint(a.body["error"]); a.status != http.StatusBadRequest || !strings.Contains(msg, "must be shorter than --deadline 1.5s minus --reserve 100ms = 1.4s") {
			t.Errorf("PATCH %s: %d %v", body, a.status, a.body)
		}
	}
	if got := depState(s, "coupon")["timeout_ms"]; got != 200.0 {
		t.Fatalf("a refused change took effect: timeout %v", got)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOverloadIsShedAtOnce(t *testing.T) {
	s, _ := startService(t, []string{"--max-inflight", "2"}, func(c *config.Serve) {
		c.Dependencies.Update("order", func(x *config.Dependency) { x.Timeout = time.Second })
	})
	s.fault("order", `{"latency_ms":400}`)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { s.get("/v1/orders/o-1") })
	}
	waitUntil(t, func() bool { return s.simRequests()["order"] >= 2 })
	a := s.get("/v1/orders/o-2")
	if a.status != http.StatusServiceUnavailable || errCode(a) != "OVERLOADED" || a.header.Get("Retry-After") == "" {
		t.Fatalf("%d %v", a.status, a.body)
	}
	// Counted on its own, not only as one more 503.
	if m := s.metricsText(); !strings.Contains(m, "orderagg_admission_rejected_total 1") {
		t.Errorf("rejection not counted:\n%s", grepLines(m, "orderagg_admission"))
	}
	wg.Wait()
}

func TestGracefulShutdownFinishesInFlightRequests(t *testing.T) {
	s, _ := startService(t, nil, nil)
	s.fault("order", `{"latency_ms":300}`)
	const n = 5
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { statuses <- s.get("/v1/orders/o-1").status })
	}
	waitUntil(t, func() bool { return s.simRequests()["order"] >= n })
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(statuses)
	for st := range statuses {
		if st != http.StatusOK {
			t.Fatalf("in-flight request answered %d during shutdown", st)
		}
	}
	if _, err := http.Get("http://" + s.addrs.API + "/healthz"); err == nil {
		t.Fatal("still accepting after shutdown")
	}
	if !strings.Contains(s.logs.String(), `"msg":"stopped"`) {
		t.Fatal("no stopped log line")
	}
}

// A client that goes away mid-request takes nothing with it: the cancelled
// context reaches the downstream calls, their bulkhead slots come back, and
// the goroutines they ran on end.
func TestCancelledRequestsReleaseSlots(t *testing.T) {
	s, _ := startService(t, nil, nil)
	s.get("/v1/orders/o-1") // warm connections
	for _, svc := range []string{"order", "logistics"} {
		s.fault(svc, `{"hang":true}`)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/v1/orders/o-%d", s.addrs.API, i), nil)
			go func() { time.Sleep(50 * time.Millisecond); cancel() }()
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	waitUntil(t, func() bool {
		for _, name := range []string{"order", "logistics"} {
			if depState(s, name)["bulkhead"].(map[string]any)["in_use"].(float64) != 0 {
				return false
			}
		}
		return true
	})
	// No goroutine is left inside a request: idle keep-alive connections in
	// the pools and the aggregator's idle workers are fine (they are
	// reused), work still running is not.
	var stuck string
	waitUntil(t, func() bool {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		stuck = ""
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "internal/orderdetail.(*Aggregator)") || strings.Contains(g, "internal/resilience.") || strings.Contains(g, "handlers.(*orders)") {
				stuck = g
			}
		}
		return stuck == ""
	})
}

// The admission limit in force is --max-inflight, published as a gauge
// beside the slots held, which all come back once the pages are answered.
func TestAdmissionLimitPublished(t *testing.T) {
	s, _ := startService(t, []string{"--max-inflight", "300"}, nil)
	for i := range 20 {
		if a := s.get(fmt.Sprintf("/v1/orders/o-%d", i)); a.status != 200 {
			t.Fatalf("page %d: %d", i, a.status)
		}
	}
	metrics := s.metricsText()
	if !strings.Contains(metrics, "orderagg_admission_limit 300") || !strings.Contains(metrics, "orderagg_admission_inflight 0") {
		t.Errorf("admission metrics:\n%s", grepLines(metrics, "orderagg_admission"))
	}
}
