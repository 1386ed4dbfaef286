package loadtest

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/sim"
)

// The scenarios' figures belong in docs/experiments.md; these tests only
// check that each runs end to end, shortened, and reports what it should.

func runScenarioJSON(t *testing.T, args ...string) Report {
	t.Helper()
	code, out, stderr := runMain(t, context.Background(), nil, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not one JSON report: %v\n%s", err, out)
	}
	return r
}

func TestFloorScenario(t *testing.T) {
	r := runScenarioJSON(t, "--scenario", "floor", "--duration", "200ms", "--warmup", "0s", "--concurrency", "4")
	if len(r.Rows) != 4 || len(r.Steps) != 4 || len(r.Findings) < 3 || r.Machine.NumCPU == 0 || r.Machine.Go == "" {
		t.Fatalf("report %+v", r)
	}
	for _, st := range r.Steps {
		if st.Summary.Requests == 0 || st.Summary.OK() != st.Summary.Requests {
			t.Errorf("%s: %d requests, %d OK: healthy zero-latency downstreams should answer every one", st.Name, st.Summary.Requests, st.Summary.OK())
		}
	}
	if !strings.Contains(r.Findings[0], "throughput orderagg ÷ floor") || !strings.Contains(r.Command, "--scenario floor") {
		t.Errorf("findings %q, command %q", r.Findings, r.Command)
	}
	// With the redis-server child, orderagg's CPU per page counts it too
	// (issue #17: "Redis included").
	if strings.HasPrefix(r.Cache, "redis-server") {
		found := ""
		for _, f := range r.Findings {
			if strings.Contains(f, "CPU per request with Redis") {
				found = f
			}
		}
		if found == "" {
			t.Errorf("cache %q but no finding with Redis's CPU: %q", r.Cache, r.Findings)
		}
		// The median round's ratio is judged; each round's, nine of them,
		// and the pooled ratio are shown beside it.
		if _, rounds, ok := strings.Cut(found, "per round "); !ok || len(strings.Split(rounds, ", ")) != 9 || !strings.Contains(found, "all rounds pooled") {
			t.Errorf("the CPU finding lacks the nine rounds' ratios and the pooled one: %q", found)
		}
		if !regexp.MustCompile(`median round [0-9.]+× \(target ≤ 1\.25×: (met|NOT met)\)`).MatchString(found) {
			t.Errorf("the CPU finding does not judge the median round: %q", found)
		}
		if _, ok := r.Steps[0].Derived["redis_server_us_per_request"]; !ok {
			t.Errorf("step %q has no redis_server_us_per_request: %v", r.Steps[0].Name, r.Steps[0].Derived)
		}
	}
}

func TestOutageScenarioPlots(t *testing.T) {
	dir := t.TempDir()
	r := runScenarioJSON(t, "--scenario", "outage", "--duration", "1s", "--rate", "50", "--plot", dir)
	// orderagg, orderagg with the old breaker settings and the floor, three
	// phases each.
	if len(r.Rows) != 9 || len(r.Plots) != 1 {
		t.Fatalf("rows %v plots %v", r.Rows, r.Plots)
	}
	for _, st := range r.Steps {
		if len(st.Summary.Timeline) < 3 {
			t.Errorf("%s: timeline %v, want ≥ 3 seconds", st.Name, st.Summary.Timeline)
		}
	}
	// The floor fails every page while logistics hangs (its requests in
	// the second phase end at the 1500 ms deadline, so look at status).
	var fl Summary
	for _, st := range r.Steps {
		if st.Name == kindFloor {
			fl = st.Summary
		}
	}
	if fl.Status["504"] == 0 {
		t.Errorf("floor status %v: expected 504s from the hang", fl.Status)
	}
	wellFormedSVG(t, filepath.Join(dir, "experiment-outage.svg"))
}

func TestBulkheadSweepPlots(t *testing.T) {
	if testing.Short() {
		t.Skip("seven steps")
	}
	dir := t.TempDir()
	r := runScenarioJSON(t, "--scenario", "bulkhead-sweep", "--duration", "150ms", "--warmup", "0s", "--concurrency", "8", "--plot", dir)
	if len(r.Rows) != 7 || len(r.Steps) != 7 {
		t.Fatalf("rows %v", r.Rows)
	}
	if st := r.Steps[0].Summary; st.Reasons["inventory"]["REJECTED"] == 0 {
		t.Errorf("bulkhead 1 at 8 workers should reject some inventory calls: %v", st.Reasons)
	}
	wellFormedSVG(t, filepath.Join(dir, "experiment-bulkhead-sweep.svg"))
}

func wellFormedSVG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(string(b)))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

func TestStallMiddleware(t *testing.T) {
	st, err := startSim(shape{
		faults: map[string]sim.Fault{sim.ServiceLogistics: {}},
		stalls: map[string]stall{sim.ServiceLogistics: {rate: 1, extra: 300 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.stop()
	get := func(path string, budgetMS string) (int, time.Duration) {
		req, _ := http.NewRequest(http.MethodGet, st.url+path, nil)
		if budgetMS != "" {
			req.Header.Set(sim.HeaderBudget, budgetMS)
		}
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	defer http.DefaultClient.CloseIdleConnections()
	if code, el := get("/logistics/v1/orders/o-1/shipment", ""); code != 200 || el < 300*time.Millisecond {
		t.Errorf("stalled call: %d after %v, want 200 after ≥ 300 ms", code, el)
	}
	// A budget shorter than the stall: the simulator's 504, once the budget is spent.
	if code, el := get("/logistics/v1/orders/o-1/shipment", "50"); code != http.StatusGatewayTimeout || el < 50*time.Millisecond || el > time.Second {
		t.Errorf("budgeted call: %d after %v, want 504 after about 50 ms", code, el)
	}
	if code, el := get("/order/v1/orders/o-1", ""); code != 200 || el > time.Second {
		t.Errorf("other services are not stalled: %d after %v", code, el)
	}
}

func TestCallersScenario(t *testing.T) {
	r := runScenarioJSON(t, "--scenario", "callers", "--duration", "300ms", "--warmup", "0s", "--concurrency", "4")
	// healthy and delayed, each with the old bulkheads and the defaults.
	if len(r.Rows) != 4 || len(r.Steps) != 4 {
		t.Fatalf("rows %v", r.Rows)
	}
	for _, s := range r.Steps {
		if s.Summary.Requests == 0 {
			t.Errorf("%s: no requests", s.Name)
		}
		if _, ok := s.Derived["degraded_share"]; !ok {
			t.Errorf("%s: no degraded share: %v", s.Name, s.Derived)
		}
	}
	if r.Rows[0][0] != "healthy" || r.Rows[2][0] != "delayed" || r.Rows[0][2] != "old" || r.Rows[1][2] != "new" {
		t.Errorf("rows %v", r.Rows)
	}
}

func TestFlappingScenarioCountsOpenings(t *testing.T) {
	r := runScenarioJSON(t, "--scenario", "flapping", "--duration", "1s", "--rate", "50")
	if len(r.Rows) != 1 || len(r.Steps) != 1 {
		t.Fatalf("rows %v", r.Rows)
	}
	if _, ok := r.Steps[0].Derived["breaker_openings"]; !ok || r.Steps[0].Summary.Requests == 0 {
		t.Errorf("step %+v", r.Steps[0])
	}
}

// The breaker watch sees a forced opening through /v1/resilience.
func TestBreakerWatchSeesAnOpening(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"dependencies":[{"name":"order","breaker":"CLOSED"},{"name":"logistics","breaker":"OPEN"}]}`))
	}))
	defer srv.Close()
	before := time.Now()
	w := watchBreakers(context.Background(), srv.URL)
	for len(w.changes()) == 0 {
		runtime.Gosched()
	}
	w.stop()
	at, ok := w.firstOpen("logistics", before)
	if !ok || at.Before(before) {
		t.Fatalf("firstOpen = %v %v; changes %v", at, ok, w.changes())
	}
	if o := w.opens(); o["logistics"] != 1 || o["order"] != 0 {
		t.Errorf("opens %v", o)
	}
}

func TestHistogramCountAbove(t *testing.T) {
	var h histogram
	for _, ms := range []int{1, 5, 99, 100, 101, 500} {
		h.record(time.Duration(ms) * time.Millisecond)
	}
	if n := h.countAbove(100 * time.Millisecond); n != 3 {
		t.Errorf("countAbove(100ms) = %d, want 3", n)
	}
	if n := h.countAbove(time.Second); n != 0 {
		t.Errorf("countAbove(1s) = %d, want 0", n)
	}
}
