package dashboard

import (
	"net/http"
	"strings"
	"testing"

	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/sim"
)

// Outside demo mode no route can break anything: every fault route is 404.
func TestFaultRoutesAre404OutsideDemoMode(t *testing.T) {
	d := New(Options{Report: countingReport()})
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/dashboard/faults", ""},
		{http.MethodDelete, "/dashboard/faults", ""},
		{http.MethodGet, "/dashboard/faults/logistics", ""},
		{http.MethodPut, "/dashboard/faults/logistics", `{"error_rate":1}`},
		{http.MethodDelete, "/dashboard/faults/logistics", ""},
	} {
		if code := errorCode(t, do(t, d, c.method, c.path, c.body), http.StatusNotFound); code != handlers.CodeNotFound {
			t.Errorf("%s %s: code %s", c.method, c.path, code)
		}
	}
}

// The fault controls are the simulator's own fault API: what the page sets
// is what the simulator then does.
func TestFaultControls(t *testing.T) {
	s := sim.New()
	d := New(Options{Report: countingReport(), Faults: s})
	all := decode[map[string]sim.Fault](t, do(t, d, http.MethodGet, "/dashboard/faults", ""))
	if len(all) != len(sim.Services()) || all["order"] != healthy {
		t.Fatalf("GET faults: %v", all)
	}
	// Omitted fields keep their defaults.
	w := do(t, d, http.MethodPut, "/dashboard/faults/inventory", `{"latency_ms":250,"error_rate":1,"error_status":502}`)
	want := sim.Fault{LatencyMS: 250, ErrorRate: 1, ErrorStatus: 502}
	if w.Code != http.StatusOK || decode[sim.Fault](t, w) != want || s.Faults()["inventory"] != want || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("PUT: %d %s %q; simulator has %+v", w.Code, w.Body, w.Header().Get("Cache-Control"), s.Faults()["inventory"])
	}
	if got := decode[sim.Fault](t, do(t, d, http.MethodGet, "/dashboard/faults/inventory", "")); got != want {
		t.Errorf("GET one: %+v", got)
	}
	if got := decode[sim.Fault](t, do(t, d, http.MethodDelete, "/dashboard/faults/inventory", "")); got != healthy || s.Faults()["inventory"] != healthy {
		t.Errorf("DELETE one: %+v", got)
	}
	mustSet := func(service string, f sim.Fault) {
		if err := s.SetFault(service, f); err != nil {
			t.Fatal(err)
		}
	}
	mustSet("logistics", sim.Fault{Hang: true})
	all = decode[map[string]sim.Fault](t, do(t, d, http.MethodDelete, "/dashboard/faults", ""))
	if all["logistics"] != healthy || s.Faults()["logistics"] != healthy {
		t.Errorf("DELETE all: %v", all)
	}
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodPost, "/dashboard/faults/logistics", "GET, HEAD, PUT, DELETE"},
		{http.MethodPut, "/dashboard/faults", "GET, HEAD, DELETE"},
	} {
		w := do(t, d, c.method, c.path, `{}`)
		if code := errorCode(t, w, http.StatusMethodNotAllowed); code != handlers.CodeMethodNotAllowed || w.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: %s, Allow %q", c.method, c.path, code, w.Header().Get("Allow"))
		}
	}
}

// A bad request is a JSON 400 and changes nothing.
func TestBadFaultRequestsChangeNothing(t *testing.T) {
	for _, c := range []struct{ name, path, body, code string }{
		{"unknown service", "/dashboard/faults/cache", `{"error_rate":1}`, "UNKNOWN_SERVICE"},
		{"empty body", "/dashboard/faults/logistics", ``, "INVALID_FAULT"},
		{"null", "/dashboard/faults/logistics", `null`, "INVALID_FAULT"},
		{"unknown field", "/dashboard/faults/logistics", `{"error_rate":1,"explode":true}`, "INVALID_FAULT"},
		{"trailing data", "/dashboard/faults/logistics", `{"error_rate":1} {}`, "INVALID_FAULT"},
		{"error rate above 1", "/dashboard/faults/logistics", `{"error_rate":1.5}`, "INVALID_FAULT"},
		{"huge body", "/dashboard/faults/logistics", `{"latency_ms":1` + strings.Repeat(" ", 16<<10) + `}`, "INVALID_FAULT"},
	} {
		s := sim.New()
		d := New(Options{Report: countingReport(), Faults: s})
		if code := errorCode(t, do(t, d, http.MethodPut, c.path, c.body), http.StatusBadRequest); code != c.code {
			t.Errorf("%s: code %s, want %s", c.name, code, c.code)
		}
		for name, f := range s.Faults() {
			if f != healthy {
				t.Errorf("%s: %s changed to %+v", c.name, name, f)
			}
		}
	}
}
