package dashboard

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/orderagg/orderagg/internal/sim"
)

func TestFaultRoutesAre404WithoutAController(t *testing.T) {
	d := New(Options{Report: countingReport()})
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/dashboard/faults", ""},
		{http.MethodDelete, "/dashboard/faults", ""},
		{http.MethodGet, "/dashboard/faults/logistics", ""},
		{http.MethodPut, "/dashboard/faults/logistics", `{"error_rate":1}`},
		{http.MethodDelete, "/dashboard/faults/logistics", ""},
	} {
		if code := errorCode(t, do(t, d, c.method, c.path, c.body), http.StatusNotFound); code != codeNotFound {
			t.Errorf("%s %s: code %s", c.method, c.path, code)
		}
	}
}

func TestFaultAPI(t *testing.T) {
	faults := newFakeFaults()
	d := New(Options{Report: countingReport(), Faults: faults})

	all := decode[map[string]sim.Fault](t, do(t, d, http.MethodGet, "/dashboard/faults", ""))
	if len(all) != len(sim.Services()) || all["order"] != healthy {
		t.Fatalf("GET faults: %v", all)
	}

	// Omitted fields keep their defaults, as in the simulator's API.
	w := do(t, d, http.MethodPut, "/dashboard/faults/logistics", `{"latency_ms":250,"error_rate":0.5}`)
	want := sim.Fault{LatencyMS: 250, ErrorRate: 0.5, ErrorStatus: 500}
	if w.Code != http.StatusOK || decode[sim.Fault](t, w) != want || faults.fault("logistics") != want {
		t.Fatalf("PUT: %d %s; controller has %+v", w.Code, w.Body, faults.fault("logistics"))
	}
	full := `{"latency_ms":1,"jitter_ms":2,"error_rate":1,"error_status":503,"hang":true,"corrupt":true}`
	want = sim.Fault{LatencyMS: 1, JitterMS: 2, ErrorRate: 1, ErrorStatus: 503, Hang: true, Corrupt: true}
	if w := do(t, d, http.MethodPut, "/dashboard/faults/coupon", full); decode[sim.Fault](t, w) != want {
		t.Fatalf("PUT all fields: %s", w.Body)
	}
	if got := decode[sim.Fault](t, do(t, d, http.MethodGet, "/dashboard/faults/coupon", "")); got != want {
		t.Errorf("GET one: %+v", got)
	}

	if got := decode[sim.Fault](t, do(t, d, http.MethodDelete, "/dashboard/faults/coupon", "")); got != healthy || faults.fault("coupon") != healthy {
		t.Errorf("DELETE one: %+v", got)
	}
	if faults.fault("logistics") == healthy {
		t.Error("DELETE of coupon reset logistics too")
	}
	all = decode[map[string]sim.Fault](t, do(t, d, http.MethodDelete, "/dashboard/faults", ""))
	if _, resets := faults.calls(); resets != 1 || all["logistics"] != healthy {
		t.Errorf("DELETE all: %d resets, %v", resets, all)
	}

	w = do(t, d, http.MethodPost, "/dashboard/faults/logistics", `{}`)
	if code := errorCode(t, w, http.StatusMethodNotAllowed); code != codeMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD, PUT, DELETE" {
		t.Errorf("POST one: %s, Allow %q", code, w.Header().Get("Allow"))
	}
	if code := errorCode(t, do(t, d, http.MethodPut, "/dashboard/faults", `{}`), http.StatusMethodNotAllowed); code != codeMethodNotAllowed {
		t.Errorf("PUT all: %s", code)
	}
}

func TestBadFaultRequestsChangeNothing(t *testing.T) {
	cases := []struct {
		name, path, body, code string
	}{
		{"unknown service", "/dashboard/faults/cache", `{"error_rate":1}`, codeUnknownService},
		{"empty body", "/dashboard/faults/logistics", ``, codeInvalidFault},
		{"null", "/dashboard/faults/logistics", `null`, codeInvalidFault},
		{"array", "/dashboard/faults/logistics", `[{"error_rate":1}]`, codeInvalidFault},
		{"not JSON", "/dashboard/faults/logistics", `error_rate=1`, codeInvalidFault},
		{"unknown field", "/dashboard/faults/logistics", `{"error_rate":1,"explode":true}`, codeInvalidFault},
		{"wrong type", "/dashboard/faults/logistics", `{"error_rate":"1"}`, codeInvalidFault},
		{"trailing data", "/dashboard/faults/logistics", `{"error_rate":1} {}`, codeInvalidFault},
		{"error rate above 1", "/dashboard/faults/logistics", `{"error_rate":1.5}`, codeInvalidFault},
		{"negative latency", "/dashboard/faults/logistics", `{"latency_ms":-1}`, codeInvalidFault},
		{"latency too long", "/dashboard/faults/logistics", `{"latency_ms":600001}`, codeInvalidFault},
		{"negative jitter", "/dashboard/faults/logistics", `{"jitter_ms":-5}`, codeInvalidFault},
		{"status not an error", "/dashboard/faults/logistics", `{"error_rate":1,"error_status":200}`, codeInvalidFault},
		{"huge body", "/dashboard/faults/logistics", `{"latency_ms":1` + strings.Repeat(" ", 16<<10) + `}`, codeInvalidFault},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			faults := newFakeFaults()
			d := New(Options{Report: countingReport(), Faults: faults})
			if code := errorCode(t, do(t, d, http.MethodPut, c.path, c.body), http.StatusBadRequest); code != c.code {
				t.Errorf("code %s, want %s", code, c.code)
			}
			if sets, _ := faults.calls(); sets != 0 {
				t.Errorf("%d faults set", sets)
			}
		})
	}
}

func TestControllerErrors(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{sim.ErrInvalidFault, http.StatusBadRequest, codeInvalidFault},
		{sim.ErrUnknownService, http.StatusBadRequest, codeUnknownService},
		{errors.New("disk on fire"), http.StatusInternalServerError, codeInternal},
	} {
		faults := newFakeFaults()
		faults.setErr(c.err)
		d := New(Options{Report: countingReport(), Faults: faults})
		w := do(t, d, http.MethodPut, "/dashboard/faults/order", `{"error_rate":1}`)
		if code := errorCode(t, w, c.status); code != c.code {
			t.Errorf("%v: code %s, want %s", c.err, code, c.code)
		}
		if c.status == http.StatusInternalServerError && strings.Contains(w.Body.String(), "fire") {
			t.Errorf("internal error leaked: %s", w.Body)
		}
	}
}

// The real simulator is a FaultController, and what the page sets is what
// the simulator then does.
func TestSimulatorAsController(t *testing.T) {
	s := sim.New()
	defer s.Close()
	d := New(Options{Report: countingReport(), Faults: s})
	if w := do(t, d, http.MethodPut, "/dashboard/faults/inventory", `{"error_rate":1,"error_status":502}`); w.Code != http.StatusOK {
		t.Fatalf("PUT: %d %s", w.Code, w.Body)
	}
	if f := s.Faults()["inventory"]; f.ErrorRate != 1 || f.ErrorStatus != 502 {
		t.Fatalf("simulator has %+v", f)
	}
	if w := do(t, s, http.MethodGet, "/inventory/v1/orders/o-1/stock", ""); w.Code != http.StatusBadGateway {
		t.Errorf("simulated inventory answered %d, want 502", w.Code)
	}
	do(t, d, http.MethodDelete, "/dashboard/faults", "")
	if f := s.Faults()["inventory"]; f.ErrorRate != 0 {
		t.Errorf("after reset the simulator has %+v", f)
	}
}
