package loadtest

import (
	"strconv"
	"strings"
	"testing"
)

// TestLatencyShiftScenario runs the drift with short phases: one row per
// reported level, both instances measured from their own /metrics, and the
// auto instance's sub-budget read within its bounds. (The figures
// themselves need the full run: docs/experiments.md.)
func TestLatencyShiftScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 8 phases of load")
	}
	r := runScenarioJSON(t, "--scenario", "latency-shift", "--duration", "1s", "--rate", "30")
	if len(r.Rows) != len(shiftLevels)-1 || len(r.Steps) != 2 || len(r.Findings) != 3 {
		t.Fatalf("rows %v steps %d findings %q", r.Rows, len(r.Steps), r.Findings)
	}
	// Over the whole run, not each steady state: with 1 s phases a steady
	// state is half a second, and on a loaded machine the /metrics scrapes
	// that bound it can take that long, leaving it empty.
	for _, st := range r.Steps {
		if st.Derived["attempts"] <= 0 || st.Derived["steady_attempts"] < 0 || st.Summary.Requests == 0 {
			t.Errorf("%s: %v logistics attempts counted (%v in steady state), %d requests",
				st.Name, st.Derived["attempts"], st.Derived["steady_attempts"], st.Summary.Requests)
		}
	}
	for _, row := range r.Rows {
		ms, err := strconv.Atoi(row[6])
		if err != nil || ms < 10 || ms > 1000 {
			t.Errorf("row %v: auto sub-budget %q, want 10..1000 ms", row, row[6])
		}
	}
	if !strings.Contains(r.Load, "timeout: auto") {
		t.Errorf("load %q", r.Load)
	}
}
