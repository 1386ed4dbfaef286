package loadtest

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
}

func TestOutageScenarioPlots(t *testing.T) {
	dir := t.TempDir()
	r := runScenarioJSON(t, "--scenario", "outage", "--duration", "1s", "--rate", "50", "--plot", dir)
	if len(r.Rows) != 6 || len(r.Plots) != 1 {
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
