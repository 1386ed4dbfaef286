package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeService answers like orderagg, with the outcome a function of the
// order number n of o-n, so that cycling through --ids 4 gives exact
// proportions:
//
//	n%4 == 1: a full page, every section live
//	n%4 == 2: degraded, inventory from the cache (TIMEOUT)
//	n%4 == 3: degraded, logistics fallback (REJECTED)
//	n%4 == 0: 503 ORDER_UNAVAILABLE
func fakeService(t *testing.T, delay time.Duration) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status":"ok"}`)) })
	mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		n, err := strconv.Atoi(strings.TrimPrefix(r.PathValue("id"), "o-"))
		if err != nil {
			http.Error(w, `{"error":{"code":"INVALID_ORDER_ID"}}`, http.StatusBadRequest)
			return
		}
		live := `{"source":"live","degraded":false}`
		sec := map[string]string{"order": live, "inventory": live, "coupons": live, "logistics": live}
		degraded := false
		switch n % 4 {
		case 0:
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"code":"ORDER_UNAVAILABLE","message":"x"}}`))
			return
		case 2:
			sec["inventory"], degraded = `{"source":"cache","degraded":true,"reason":"TIMEOUT","as_of":"2026-01-01T00:00:00Z","status":"CONFIRMED"}`, true
		case 3:
			sec["logistics"], degraded = `{"source":"fallback","degraded":true,"reason":"REJECTED","status":"UNKNOWN"}`, true
		}
		fmt.Fprintf(w, `{"order_id":%q,"degraded":%t,"order":%s,"inventory":%s,"coupons":%s,"logistics":%s}`,
			r.PathValue("id"), degraded, sec["order"], sec["inventory"], sec["coupons"], sec["logistics"])
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func runMain(t *testing.T, ctx context.Context, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	for k, v := range env { // ff reads the process environment
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	code = Main(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestSummaryCountsStatusesAndSources(t *testing.T) {
	srv := fakeService(t, 0)
	code, out, stderr := runMain(t, context.Background(), nil,
		"--url", srv.URL, "--ids", "4", "--max-requests", "400", "--warmup", "0s", "--duration", "30s", "--concurrency", "8", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	var s Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("output is not one JSON summary: %v\n%s", err, out)
	}
	if s.Requests != 400 {
		t.Errorf("requests = %d, want 400 (--max-requests)", s.Requests)
	}
	if s.Status["200"] != 300 || s.Status["503"] != 100 || s.Errors != 0 {
		t.Errorf("status = %v, errors %d; want 300×200, 100×503, no errors", s.Status, s.Errors)
	}
	if s.DegradedRatio < 0.666 || s.DegradedRatio > 0.667 || s.DegradedPages != 200 {
		t.Errorf("degraded = %v (%d pages), want 2/3 of the 200s (200 pages)", s.DegradedRatio, s.DegradedPages)
	}
	want := map[string]map[string]int64{
		"order":     {"live": 300, "cache": 0, "fallback": 0},
		"inventory": {"live": 200, "cache": 100, "fallback": 0},
		"coupons":   {"live": 300, "cache": 0, "fallback": 0},
		"logistics": {"live": 200, "cache": 0, "fallback": 100},
	}
	for sec, m := range want {
		for src, n := range m {
			if got := s.Sources[sec][src]; got != n {
				t.Errorf("sources[%s][%s] = %d, want %d", sec, src, got, n)
			}
		}
	}
	if s.Reasons["inventory"]["TIMEOUT"] != 100 || s.Reasons["logistics"]["REJECTED"] != 100 {
		t.Errorf("reasons = %v", s.Reasons)
	}
	if s.RPS <= 0 || s.WindowS <= 0 || s.Latency.Max < s.Latency.P50 || s.Latency.P50 <= 0 {
		t.Errorf("rate/latency not filled in: rps %v window %v latency %+v", s.RPS, s.WindowS, s.Latency)
	}
	// The JSON names the contract of --json promises.
	var raw map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	for _, k := range []string{"requests", "rps", "latency_ms", "status", "degraded_ratio", "sources", "errors"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON summary lacks %q", k)
		}
	}
	lat := raw["latency_ms"].(map[string]any)
	for _, k := range []string{"p50", "p90", "p99", "p999", "max"} {
		if _, ok := lat[k]; !ok {
			t.Errorf("latency_ms lacks %q", k)
		}
	}
}

func TestTextSummary(t *testing.T) {
	srv := fakeService(t, 0)
	code, out, stderr := runMain(t, context.Background(), nil,
		"--url", srv.URL, "--ids", "4", "--max-requests", "40", "--warmup", "0s", "--concurrency", "2")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	for _, want := range []string{"requests  40 in", "p99.9", "full pages", "degraded pages", "200: 30, 503: 10",
		"degraded  66.67% of 200 answers", "inventory  20 (66.7%)", "TIMEOUT 10", "REJECTED 10"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if stderr != "" {
		t.Errorf("stderr is not a terminal, so no progress line is expected; got %q", stderr)
	}
}

func TestLatencyIsMeasured(t *testing.T) {
	srv := fakeService(t, 20*time.Millisecond)
	code, out, _ := runMain(t, context.Background(), nil,
		"--url", srv.URL, "--max-requests", "20", "--warmup", "0s", "--concurrency", "4", "--json")
	if code != 0 {
		t.Fatal(code)
	}
	var s Summary
	_ = json.Unmarshal([]byte(out), &s)
	// Only a lower bound: the machine may be slow, never faster than the
	// server's sleep.
	if s.Latency.P50 < 20 || s.Latency.Max < s.Latency.P99 {
		t.Errorf("latency %+v, want p50 ≥ 20 ms", s.Latency)
	}
}

func TestClosedAndOpenLoop(t *testing.T) {
	srv := fakeService(t, 100*time.Millisecond)
	count := func(args ...string) int64 {
		t.Helper()
		code, out, stderr := runMain(t, context.Background(), nil,
			append([]string{"--url", srv.URL, "--warmup", "0s", "--duration", "400ms", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var s Summary
		_ = json.Unmarshal([]byte(out), &s)
		return s.Requests
	}
	// Closed loop: 2 workers × 400 ms ÷ 100 ms is about 8 requests; each
	// worker waits for its answer, so never more than 2 × 5.
	if n := count("--concurrency", "2"); n < 2 || n > 10 {
		t.Errorf("closed loop sent %d requests, want 2..10", n)
	}
	// Open loop: 100 req/s for 400 ms is 40 requests whatever the latency.
	if n := count("--rate", "100", "--concurrency", "2"); n < 30 || n > 40 {
		t.Errorf("open loop sent %d requests, want 30..40", n)
	}
}

func TestRunIsBoundedByDuration(t *testing.T) {
	srv := fakeService(t, 0)
	start := time.Now()
	code, out, _ := runMain(t, context.Background(), nil,
		"--url", srv.URL, "--warmup", "100ms", "--duration", "300ms", "--concurrency", "4", "--json")
	if code != 0 {
		t.Fatal(code)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("a 400 ms run took %v", el)
	}
	var s Summary
	_ = json.Unmarshal([]byte(out), &s)
	if s.Requests == 0 || s.WindowS < 0.29 || s.WindowS > 0.5 {
		t.Errorf("requests %d over %vs, want some over about 0.3 s", s.Requests, s.WindowS)
	}
}

func TestRefusesNonLoopbackTargets(t *testing.T) {
	for _, u := range []string{"http://192.0.2.10:8080", "http://[2001:db8::1]:8080", "https://10.0.0.1"} {
		code, _, stderr := runMain(t, context.Background(), nil, "--url", u)
		if code != 2 || !strings.Contains(stderr, "--allow-remote") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want 2 and one line naming --allow-remote", u, code, stderr)
		}
	}
	// localhost is loopback.
	srv := fakeService(t, 0)
	local := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	if code, _, stderr := runMain(t, context.Background(), nil, "--url", local, "--max-requests", "4", "--warmup", "0s"); code != 0 {
		t.Errorf("%s refused: %d %s", local, code, stderr)
	}
}

func TestDialerRefusesNonLoopback(t *testing.T) {
	tg := newTarget("http://192.0.2.10:9", 1, false)
	defer tg.close()
	res, ok := tg.do(context.Background(), "o-1", time.Now(), time.Second)
	if !ok || res.status != 0 || res.errKind != "not_loopback" {
		t.Errorf("got status %d kind %q, want the dialer to refuse (not_loopback)", res.status, res.errKind)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		flag string
	}{
		{[]string{"--rate", "fast"}, nil, "--rate"},
		{[]string{"--rate", "-5"}, nil, "--rate"},
		{[]string{"--concurrency", "0"}, nil, "--concurrency"},
		{[]string{"--duration", "0s"}, nil, "--duration"},
		{[]string{"--warmup", "-1s"}, nil, "--warmup"},
		{[]string{"--timeout", "soon"}, nil, "--timeout"},
		{[]string{"--ids", "0"}, nil, "--ids"},
		{[]string{"--max-requests", "x"}, nil, "--max-requests"},
		{[]string{"--url", "127.0.0.1:8080"}, nil, "--url"},
		{[]string{"--url", "ftp://127.0.0.1"}, nil, "--url"},
		{[]string{"--json=maybe"}, nil, "--json"},
		{[]string{"--scenario", "nope"}, nil, "--scenario"},
		{[]string{"--plot", "/tmp/x"}, nil, "--plot"},
		{[]string{"--redis-url", "redis://127.0.0.1:6379"}, nil, "--redis-url"},
		{[]string{"--cpuprofile", "/tmp/cpu.out"}, nil, "--cpuprofile"},
		{[]string{"--memprofile", "/tmp/mem.out"}, nil, "--memprofile"},
		{[]string{"--scenario", "floor", "--redis-url", "http://127.0.0.1:6379"}, nil, "--redis-url"},
		{[]string{"--bogus"}, nil, "-bogus"},
		{[]string{"extra"}, nil, "extra"},
		{nil, map[string]string{"ORDERAGG_TIMEOUT": "soon"}, "ORDERAGG_TIMEOUT"},
		{nil, map[string]string{"ORDERAGG_ALLOW_REMOTE": "perhaps"}, "--allow-remote"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, stderr := runMain(t, context.Background(), c.env, c.args...)
			if code != 2 || !strings.Contains(stderr, c.flag) || strings.Count(stderr, "\n") != 1 || out != "" {
				t.Errorf("%v %v: exit %d, stderr %q; want 2 and one line naming %s", c.args, c.env, code, stderr, c.flag)
			}
		})
	}
}

func TestFlagsWinOverEnvironment(t *testing.T) {
	for k, v := range map[string]string{"ORDERAGG_IDS": "7", "ORDERAGG_RATE": "50", "ORDERAGG_JSON": "true", "ORDERAGG_URL": "http://localhost:9"} {
		t.Setenv(k, v)
	}
	o, err := parseOptions([]string{"--ids", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if o.IDs != 3 || o.Rate != 50 || !o.JSON || o.URL != "http://localhost:9" || o.Concurrency != 16 {
		t.Errorf("got %+v", o)
	}
	if !o.given("rate") || o.given("concurrency") {
		t.Errorf("given: rate %v, concurrency %v", o.given("rate"), o.given("concurrency"))
	}
}

func TestHelp(t *testing.T) {
	code, out, _ := runMain(t, context.Background(), nil, "--help")
	if code != 0 {
		t.Fatal(code)
	}
	for _, want := range []string{"--url URL  (ORDERAGG_URL, default http://127.0.0.1:8080)", "--rate", "--concurrency int  (ORDERAGG_CONCURRENCY, default 16)",
		"--duration duration  (ORDERAGG_DURATION, default 10s)", "--warmup duration  (ORDERAGG_WARMUP, default 2s)",
		"--ids int  (ORDERAGG_IDS, default 1000)", "--max-requests", "--timeout duration  (ORDERAGG_TIMEOUT, default 5s)",
		"--json", "--allow-remote", "--scenario", "bulkhead-sweep", "--plot", "--redis-url"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

func TestUnreachableTargetExits1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	code, _, stderr := runMain(t, context.Background(), nil, "--url", "http://"+addr, "--duration", "100ms")
	if code != 1 || !strings.Contains(stderr, "cannot reach") {
		t.Errorf("exit %d, %q", code, stderr)
	}
}

func TestNoAnswersExits1(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/v1/orders/", func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	code, out, stderr := runMain(t, context.Background(), nil, "--url", srv.URL, "--max-requests", "10", "--warmup", "0s", "--json")
	var s Summary
	_ = json.Unmarshal([]byte(out), &s)
	if code != 1 || s.Errors != 10 || s.ErrorKinds["reset"] != 10 || !strings.Contains(stderr, "no request got an answer") {
		t.Errorf("exit %d, errors %v, stderr %q", code, s.ErrorKinds, stderr)
	}
}

func TestInterruptPrintsPartialFigures(t *testing.T) {
	srv := fakeService(t, 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(300 * time.Millisecond)
		cancel()
	}()
	start := time.Now()
	code, out, stderr := runMain(t, ctx, nil, "--url", srv.URL, "--warmup", "0s", "--duration", "1m", "--json")
	if code != 1 || !strings.Contains(stderr, "interrupted") {
		t.Errorf("exit %d, %q", code, stderr)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("cancellation took %v", el)
	}
	var s Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Requests == 0 || s.Errors != 0 {
		t.Errorf("partial summary: %v, %+v", err, s)
	}
}

func TestTableMatchesHelp(t *testing.T) {
	_, help, _ := runMain(t, context.Background(), nil, "--help")
	rows := strings.Split(strings.TrimSpace(Table()), "\n")[2:]
	if len(rows) != 15 {
		t.Fatalf("%d rows for 15 flags", len(rows))
	}
	for _, r := range rows {
		cells := strings.Split(r, "`")
		if name, env := cells[1], cells[3]; !strings.Contains(help, name+" ") || !strings.Contains(help, "("+env+", default") {
			t.Errorf("--help lacks %s (%s)", name, env)
		}
	}
	if !strings.Contains(Table(), "| `--url` | `ORDERAGG_URL` | `http://127.0.0.1:8080` |") {
		t.Errorf("no --url row with its default:\n%s", Table())
	}
}
