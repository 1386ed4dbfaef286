package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/downstream"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go-redis's dialer goroutine ends on its own within a second of Close.
		goleak.IgnoreTopFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	)
}

// service is an in-process orderagg in embedded demo mode.
type service struct {
	t     *testing.T
	addrs Addrs
	logs  *syncBuffer
	stop  func() error // ends Serve (as SIGTERM does) and waits for it
	// stalls watches this process for hold-ups while the service runs;
	// stop ends it.
	stalls *stallWatch
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startService runs Serve until the test ends. edit may change the
// configuration first (shorter budgets keep hang tests quick).
func startService(t *testing.T, args []string, edit func(*config.Serve)) (*service, chan<- os.Signal) {
	t.Helper()
	return startServiceEnv(t, args, edit, nil)
}

// startServiceEnv is startService with envEdit changing the Env first.
func startServiceEnv(t *testing.T, args []string, edit func(*config.Serve), envEdit func(*Env)) (*service, chan<- os.Signal) {
	t.Helper()
	cfg, err := config.ParseServeArgs(append([]string{"--addr", "127.0.0.1:0"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan Addrs, 1)
	done := make(chan error, 1)
	reload := make(chan os.Signal)
	s := &service{t: t, logs: &syncBuffer{}, stalls: watchStalls()}
	env := Env{Stderr: s.logs, Reload: reload, OnReady: func(a Addrs) { ready <- a }}
	if envEdit != nil {
		envEdit(&env)
	}
	go func() { done <- Serve(ctx, cfg, env) }()
	var once sync.Once
	var serveErr error
	s.stop = func() error {
		once.Do(func() {
			cancel()
			serveErr = <-done
			http.DefaultClient.CloseIdleConnections()
			s.stalls.close() // watched while the service ran
		})
		return serveErr
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	select {
	case s.addrs = <-ready:
	case err := <-done:
		// Put it back for stop, which the cleanup calls: it would wait on
		// the drained channel for ever (a start-up error hung the package
		// until go test's timeout).
		done <- err
		t.Fatalf("Serve ended before ready: %v\n%s", err, s.logs)
	}
	return s, reload
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	took   time.Duration
}

func (s *service) do(method, url string, body string, header map[string]string) answer {
	s.t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, took: time.Since(start)}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			s.t.Fatalf("%s %s: invalid JSON %q: %v", method, url, raw, err)
		}
	}
	return a
}

func (s *service) get(path string) answer {
	return s.do(http.MethodGet, "http://"+s.addrs.API+path, "", nil)
}

func (s *service) fault(svc, body string) {
	s.t.Helper()
	a := s.do(http.MethodPut, "http://"+s.addrs.Sim+"/faults/"+svc, body, nil)
	if a.status != http.StatusOK {
		s.t.Fatalf("fault %s %s: %d %v", svc, body, a.status, a.body)
	}
}

func (s *service) simRequests() map[string]float64 {
	a := s.do(http.MethodGet, "http://"+s.addrs.Sim+"/stats", "", nil)
	out := map[string]float64{}
	for k, v := range a.body {
		out[k] = v.(map[string]any)["requests"].(float64)
	}
	return out
}

func sec(a answer, name string) map[string]any {
	s, _ := a.body[name].(map[string]any)
	return s
}

func errCode(a answer) string {
	e, _ := a.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func TestHealthyAnswer(t *testing.T) {
	s, _ := startService(t, nil, nil)
	a := s.do(http.MethodGet, "http://"+s.addrs.API+"/v1/orders/o-1001", "", map[string]string{"X-Request-Id": "req-42"})
	if a.status != http.StatusOK || a.body["degraded"] != false || a.body["order_id"] != "o-1001" {
		t.Fatalf("%d %v", a.status, a.body)
	}
	if a.header.Get("X-Request-Id") != "req-42" {
		t.Fatalf("request id %q", a.header.Get("X-Request-Id"))
	}
	if a.header.Get("Cache-Control") == "no-store" {
		t.Fatal("healthy answer marked no-store")
	}
	for _, name := range []string{"order", "inventory", "coupons", "logistics"} {
		s := sec(a, name)
		if s["source"] != "live" || s["degraded"] != false {
			t.Errorf("%s: %v", name, s)
		}
		if _, has := s["reason"]; has {
			t.Errorf("%s: live section with a reason", name)
		}
	}
	order := sec(a, "order")["data"].(map[string]any)
	if order["id"] != "o-1001" || len(order["items"].([]any)) == 0 {
		t.Fatalf("order data %v", order)
	}
	if sec(a, "inventory")["status"] != "CONFIRMED" {
		t.Fatalf("inventory %v", sec(a, "inventory"))
	}
}

func TestDegradation(t *testing.T) {
	// Only a dependency made to wait gets a budget of its own, short
	// (hangBudget) or below its delay (coupon's default 300 ms against
	// 1000 ms); a failing one answers at once and the healthy ones must
	// answer live, so they keep the defaults, which a cold, loaded process
	// meets. A tight budget on those would test the scheduler.
	tests := []struct {
		svc, fault, section, reason string
		hangs                       bool
	}{
		{"inventory", `{"error_rate":1}`, "inventory", "FAILURE", false},
		{"inventory", `{"hang":true}`, "inventory", "TIMEOUT", true},
		{"inventory", `{"corrupt":true}`, "inventory", "FAILURE", false},
		{"coupon", `{"error_rate":1,"error_status":503}`, "coupons", "FAILURE", false},
		{"coupon", `{"latency_ms":1000}`, "coupons", "TIMEOUT", false},
		{"logistics", `{"hang":true}`, "logistics", "TIMEOUT", true},
		{"logistics", `{"corrupt":true}`, "logistics", "FAILURE", false},
	}
	for _, tc := range tests {
		t.Run(tc.svc+tc.fault, func(t *testing.T) {
			var hung []string
			if tc.hangs {
				hung = append(hung, tc.svc)
			}
			s, _ := startService(t, nil, hangBudgets(hung...))
			s.fault(tc.svc, tc.fault)
			a, took, held := s.timedGet("/v1/orders/o-77") // never seen: no last-good answer
			if a.status != http.StatusOK || a.body["degraded"] != true {
				t.Fatalf("%d %v", a.status, a.body)
			}
			if a.header.Get("Cache-Control") != "no-store" {
				t.Fatal("degraded answer without Cache-Control: no-store")
			}
			got := sec(a, tc.section)
			if got["source"] != "fallback" || got["degraded"] != true || got["reason"] != tc.reason {
				t.Fatalf("%s: %v", tc.section, got)
			}
			switch tc.section {
			case "inventory":
				if got["status"] != "UNKNOWN" {
					t.Fatalf("inventory status %v", got["status"])
				}
				items := got["items"].([]any)
				orderItems := sec(a, "order")["data"].(map[string]any)["items"].([]any)
				if len(items) != len(orderItems) {
					t.Fatalf("%d unknown items for %d order items", len(items), len(orderItems))
				}
				for _, it := range items {
					m := it.(map[string]any)
					if v, ok := m["available"]; !ok || v != nil || m["status"] != "UNKNOWN" {
						t.Fatalf("fabricated stock %v", m)
					}
				}
			case "coupons":
				if items, ok := got["items"].([]any); !ok || len(items) != 0 {
					t.Fatalf("coupons items %v", got["items"])
				}
			case "logistics":
				if got["status"] != "UNKNOWN" {
					t.Fatalf("logistics status %v", got["status"])
				}
			}
			for _, other := range []string{"order", "inventory", "coupons", "logistics"} {
				if other != tc.section && sec(a, other)["source"] != "live" {
					t.Errorf("%s degraded by a fault in %s", other, tc.svc)
				}
			}
			if deadline := config.DefaultServe().Deadline; took-held > deadline {
				t.Errorf("answer took %v by the service's measure (the process held up %v of it), deadline %v", took, held, deadline)
			}
		})
	}
}

func TestLastGoodAnswerServedWithAge(t *testing.T) {
	s, _ := startService(t, nil, patientCache)
	s.getLive("/v1/orders/o-5")
	// The write-behind is asynchronous: wait (bounded) until a failure is
	// answered from the cache.
	s.fault("logistics", `{"error_rate":1}`)
	s.fault("order", `{"error_rate":1}`)
	var a answer
	waitUntil(t, func() bool {
		a = s.get("/v1/orders/o-5")
		return sec(a, "logistics")["source"] == "cache" && sec(a, "order")["source"] == "cache"
	})
	for _, name := range []string{"order", "logistics"} {
		got := sec(a, name)
		if got["source"] != "cache" || got["degraded"] != true || got["reason"] != "FAILURE" {
			t.Fatalf("%s: %v", name, got)
		}
		asOf, err := time.Parse(time.RFC3339Nano, fmt.Sprint(got["as_of"]))
		if err != nil || time.Since(asOf) > time.Minute || time.Since(asOf) < 0 {
			t.Fatalf("%s as_of %v (%v)", name, got["as_of"], err)
		}
	}
	if a.status != http.StatusOK {
		t.Fatalf("order from cache: %d", a.status)
	}
}

func TestOrderFailures(t *testing.T) {
	s, _ := startService(t, nil, hangBudgets("order"))
	a := s.get("/v1/orders/nf-123")
	if a.status != http.StatusNotFound || errCode(a) != "ORDER_NOT_FOUND" {
		t.Fatalf("%d %v", a.status, a.body)
	}
	s.fault("order", `{"hang":true}`)
	a, took, held := s.timedGet("/v1/orders/o-9")
	if a.status != http.StatusServiceUnavailable || errCode(a) != "ORDER_UNAVAILABLE" || a.header.Get("Retry-After") == "" {
		t.Fatalf("%d %v %v", a.status, a.body, a.header)
	}
	// The order's sub-budget ends the wait; the page's deadline bounds the
	// answer, by the service's own measure, less any hold-up of the process.
	if deadline := config.DefaultServe().Deadline; took-held > deadline {
		t.Fatalf("503 took %v (the process held up %v of it), deadline %v", took, held, deadline)
	}
	// A 404 does not count against the order service's health.
	r := s.get("/v1/resilience")
	for _, d := range r.body["dependencies"].([]any) {
		m := d.(map[string]any)
		if m["name"] == "order" && m["counts"].(map[string]any)["bad_request"].(float64) != 1 {
			t.Fatalf("order counts %v", m["counts"])
		}
	}
}

// Every sub-budget is far longer than the page's deadline here, so the
// deadline alone must end the wait; the reserve (default 100 ms) is what the
// design keeps back for the answer after it.
func TestEverythingHangingStaysInsideDeadline(t *testing.T) {
	const deadline = 300 * time.Millisecond
	s, _ := startService(t, nil, func(c *config.Serve) {
		c.Deadline = deadline
		for _, name := range []string{"order", "inventory", "coupon", "logistics"} {
			c.Dependencies.Update(name, func(d *config.Dependency) { d.Timeout = time.Minute })
		}
	})
	for _, svc := range []string{"order", "inventory", "coupon", "logistics"} {
		s.fault(svc, `{"hang":true}`)
	}
	for range 3 {
		a, took, held := s.timedGet("/v1/orders/o-1")
		if a.status != http.StatusServiceUnavailable {
			t.Fatalf("%d %v", a.status, a.body)
		}
		if took-held > deadline {
			t.Fatalf("answer after %v by the service's measure (the process held up %v of it), deadline %v", took, held, deadline)
		}
	}
}

func TestBadInputNeverReachesADownstream(t *testing.T) {
	s, _ := startService(t, nil, nil)
	before := s.simRequests()
	for _, id := range []string{"has%20space", strings.Repeat("a", 65), "semi;colon", "%2e%2e", "uni%C3%A9"} {
		a := s.get("/v1/orders/" + id)
		if a.status != http.StatusBadRequest || errCode(a) != "INVALID_ORDER_ID" {
			t.Errorf("%q: %d %v", id, a.status, a.body)
		}
	}
	if after := s.simRequests(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("invalid ids reached downstreams: %v → %v", before, after)
	}
}

func TestEdgeErrorsAreJSON(t *testing.T) {
	s, _ := startService(t, nil, nil)
	api := "http://" + s.addrs.API
	tests := []struct {
		method, path string
		header       map[string]string
		status       int
		code         string
	}{
		{"GET", "/nope", nil, 404, "NOT_FOUND"},
		{"POST", "/v1/orders/o-1", nil, 405, "METHOD_NOT_ALLOWED"},
		{"DELETE", "/healthz", nil, 405, "METHOD_NOT_ALLOWED"},
		{"GET", "/v1/orders/" + strings.Repeat("a", 9000), nil, 414, "URI_TOO_LONG"},
	}
	for _, tc := range tests {
		a := s.do(tc.method, api+tc.path, "", tc.header)
		if a.status != tc.status || errCode(a) != tc.code {
			t.Errorf("%s %.40s: %d %v", tc.method, tc.path, a.status, a.body)
		}
	}
	// Headers over 64 KiB are refused by the server itself (sent raw, as
	// any client would; Go's client hides the early answer).
	if got := rawStatus(t, s.addrs.API, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("x", 65<<10)+"\r\n\r\n"); got != "431" {
		t.Fatalf("big header: status %s", got)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if a := s.get(p); a.status != 200 {
			t.Errorf("%s: %d", p, a.status)
		}
	}
}

// metricsText is /metrics, fetched on a connection of its own that it
// closes.
func (s *service) metricsText() string {
	s.t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + s.addrs.API + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

// A client that dribbles its headers is cut off after
// --read-header-timeout, and it delays nobody else.
func TestSlowHeaderClientIsCutOff(t *testing.T) {
	s, _ := startService(t, []string{"--read-header-timeout", "300ms"}, nil)
	conn, err := net.Dial("tcp", s.addrs.API)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The server's other bound on reading a request is its read timeout
	// (10 s); the connection opened before this clock starts, so a cut seen
	// before start+read was the header timeout's doing, however slowly this
	// process runs.
	const read = 10 * time.Second // the server's ReadTimeout
	start := time.Now()
	if _, err := conn.Write([]byte("GET /v1/orders/o-1 HTTP/1.1\r\nHost: x\r\nX-Slow: ")); err != nil {
		t.Fatal(err)
	}
	// One header byte every 50ms, for as long as the connection takes it:
	// never a complete request.
	dribble := make(chan struct{})
	go func() {
		defer close(dribble)
		for {
			if _, err := conn.Write([]byte{'a'}); err != nil {
				return // cut off, or closed below
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	// Meanwhile everybody else is served.
	if a := s.get("/v1/orders/o-2"); a.status != 200 {
		t.Fatalf("a normal request during the slow one: %d", a.status)
	}
	// The server closes the slow connection: reading ends (EOF, or net/http's
	// plain-text 400/408 with Connection: close first) before the read
	// timeout could have ended it.
	_ = conn.SetReadDeadline(start.Add(read))
	rest, err := io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("slow client still connected after %v (the read timeout), want cut off at the 300ms header timeout", time.Since(start))
	}
	if len(rest) > 0 && !strings.HasPrefix(string(rest), "HTTP/1.1 400") && !strings.HasPrefix(string(rest), "HTTP/1.1 408") {
		t.Errorf("slow client got %q, want nothing, a 400 or a 408", rest)
	}
	conn.Close()
	<-dribble
}

// rawStatus writes req on a new connection and returns the status code.
func rawStatus(t *testing.T, addr, req string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	wrote := make(chan struct{})
	go func() { // the server may answer before reading it all
		defer close(wrote)
		conn.Write([]byte(req))
	}()
	defer func() { conn.Close(); <-wrote }()
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("reading status: %v", err)
	}
	fields := strings.Fields(line)
	if len(fields) < 2 {
		t.Fatalf("status line %q", line)
	}
	return fields[1]
}

func TestResilienceSnapshot(t *testing.T) {
	s, _ := startService(t, nil, nil)
	s.get("/v1/orders/o-1")
	a := s.get("/v1/resilience")
	deps := a.body["dependencies"].([]any)
	var names []string
	for _, d := range deps {
		m := d.(map[string]any)
		names = append(names, m["name"].(string))
		for _, key := range []string{"breaker", "counts", "error_percent", "latency_ms", "bulkhead", "timeout_ms", "recommended_timeout_ms"} {
			if _, ok := m[key]; !ok {
				t.Errorf("%s lacks %s", m["name"], key)
			}
		}
		if m["breaker"] != "CLOSED" {
			t.Errorf("%s breaker %v", m["name"], m["breaker"])
		}
	}
	// One guard per registered downstream, in page order, then the cache's.
	if want := append(downstream.Names(), config.NameCache); fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("dependencies %v", names)
	}
}

func TestMetricsCountEachEventOnItsOwn(t *testing.T) {
	s, _ := startService(t, nil, func(c *config.Serve) { hangBudgets("logistics")(c); patientCache(c) })
	s.getLive("/v1/orders/o-1") // live: remembered
	s.fault("logistics", `{"hang":true}`)
	s.fault("coupon", `{"error_rate":1}`)
	waitUntil(t, func() bool { return sec(s.get("/v1/orders/o-1"), "logistics")["source"] == "cache" })
	s.get("/v1/orders/o-404404") // never seen: coupon fallback fails (cache miss)
	resp, err := http.Get("http://" + s.addrs.API + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(raw)
	for _, want := range []string{
		`orderagg_dependency_events_total{dependency="logistics",event="timeout"}`,
		`orderagg_dependency_events_total{dependency="logistics",event="fallback_success"}`,
		`orderagg_dependency_events_total{dependency="logistics",event="cache_hit"}`,
		`orderagg_dependency_events_total{dependency="coupon",event="failure"}`,
		`orderagg_dependency_events_total{dependency="coupon",event="fallback_failure"}`,
		`orderagg_dependency_events_total{dependency="coupon",event="cache_miss",reason="absent"}`,
		`orderagg_dependency_events_total{dependency="order",event="success"}`,
		`orderagg_http_requests_total{degraded="true",status="200"}`,
		`orderagg_breaker_state{dependency="inventory"} 0`,
		`orderagg_bulkhead_capacity{dependency="order"} 1024`, // --max-inflight, one slot a page
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", grepLines(metrics, "orderagg_dependency_events_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
