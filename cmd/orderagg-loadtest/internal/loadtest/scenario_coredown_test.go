package loadtest

import (
	"strings"
	"testing"
)

// TestCoreDownScenario runs core-down shortened. The figure itself (calls
// per refused page) is pinned in-process by internal/orderdetail's
// TestNoFanOutForARefusedPage; here only the report's shape is checked, as
// whether a shortened opening phase suffices depends on the machine.
func TestCoreDownScenario(t *testing.T) {
	r := runScenarioJSON(t, "--scenario", "core-down", "--warmup", "2s", "--duration", "300ms", "--rate", "40")
	if len(r.Rows) != 4 || len(r.Steps) != 4 || len(r.Findings) != 2 {
		t.Fatalf("rows %v, findings %v", r.Rows, r.Findings)
	}
	for _, st := range r.Steps {
		if st.Summary.Requests == 0 || st.Summary.Status["503"] != st.Summary.Requests {
			t.Errorf("%s: status %v of %d requests: every page should be refused", st.Name, st.Summary.Status, st.Summary.Requests)
		}
		if _, ok := st.Derived["other_calls_per_refused_page"]; !ok {
			t.Errorf("%s: derived %v", st.Name, st.Derived)
		}
	}
	if !strings.Contains(r.Findings[0], "per refused page") {
		t.Errorf("findings %q", r.Findings)
	}
}
