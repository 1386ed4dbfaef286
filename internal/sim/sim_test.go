package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func do(t *testing.T, h http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	return doCtx(t, context.Background(), h, method, path, body, header...)
}

func doCtx(t *testing.T, ctx context.Context, h http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func servicePath(service, id string) string {
	return strings.Replace(services[service].path, "{id}", id, 1)
}

func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	var b struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	if b.Error.Code == "" || b.Error.Message == "" {
		t.Fatalf("error body %q lacks code or message", w.Body)
	}
	return b.Error.Code
}

func decodeJSON[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("decoding %s: %v", w.Body, err)
	}
	return v
}

func allHealthy() map[string]Fault {
	m := map[string]Fault{}
	for _, svc := range Services() {
		m[svc] = healthy
	}
	return m
}

func equalFaults(a, b map[string]Fault) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func mustSet(t *testing.T, s *Server, service string, f Fault) {
	t.Helper()
	if err := s.SetFault(service, f); err != nil {
		t.Fatal(err)
	}
}

// The contract's four services are served, under names of their own.
func TestContractServicesRegistered(t *testing.T) {
	got := Services()
	for _, want := range []string{ServiceOrder, ServiceInventory, ServiceCoupon, ServiceLogistics} {
		if !slices.Contains(got, want) || services[want].name != want {
			t.Errorf("Services() = %v, lacks %q", got, want)
		}
	}
}

func TestServicesAnswerTheirData(t *testing.T) {
	s := New()
	for _, svc := range Services() {
		for _, id := range []string{"o-1001", "A_b-9", "x"} {
			w := do(t, s, http.MethodGet, servicePath(svc, id), "")
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%s %s: status %d, Content-Type %q, body %s", svc, id, w.Code, w.Header().Get("Content-Type"), w.Body)
			}
			want, _ := json.Marshal(services[svc].answer(id))
			if got := w.Body.Bytes(); string(got) != string(want) {
				t.Errorf("%s %s: body = %s, want %s", svc, id, got, want)
			}
		}
	}
}

func TestBodiesAreDeterministic(t *testing.T) {
	a, b := New(), New()
	for _, svc := range Services() {
		for _, id := range []string{"o-1", "o-2", "order-42"} {
			wa := do(t, a, http.MethodGet, servicePath(svc, id), "")
			wb := do(t, b, http.MethodGet, servicePath(svc, id), "")
			if wa.Body.String() != wb.Body.String() {
				t.Errorf("%s %s: two servers differ:\n%s\n%s", svc, id, wa.Body, wb.Body)
			}
		}
		if do(t, a, http.MethodGet, servicePath(svc, "o-1"), "").Body.String() == do(t, a, http.MethodGet, servicePath(svc, "o-2"), "").Body.String() {
			t.Errorf("%s: o-1 and o-2 have the same body", svc)
		}
	}
}

// TestDataIsConsistent checks, over many ids, that the four services tell
// one story about each order.
func TestDataIsConsistent(t *testing.T) {
	sawStatus, sawCoupons, sawStock := map[string]bool{}, map[int]bool{}, map[string]bool{}
	for i := range 500 {
		id := fmt.Sprintf("o-%d", i)
		o := OrderFor(id)
		if o.ID != id || o.UserID == "" || o.CreatedAt.IsZero() || len(o.Currency) != 3 || o.ShippingAddress.Country == "" || o.ShippingAddress.City == "" {
			t.Fatalf("%s: incomplete order %+v", id, o)
		}
		if n := len(o.Items); n < 1 || n > 5 {
			t.Fatalf("%s: %d items", id, n)
		}
		var total int64
		var orderSKUs []string
		for _, it := range o.Items {
			if !strings.HasPrefix(it.SKU, "SKU-") || len(it.SKU) != 8 || it.Quantity < 1 || it.UnitPriceCents <= 0 || slices.Contains(orderSKUs, it.SKU) {
				t.Fatalf("%s: bad or repeated item %+v", id, it)
			}
			orderSKUs = append(orderSKUs, it.SKU)
			total += int64(it.Quantity) * it.UnitPriceCents
		}
		if total != o.TotalCents {
			t.Fatalf("%s: total %d, items sum to %d", id, o.TotalCents, total)
		}

		st := StockFor(id)
		var skus []string
		for _, l := range st.Items {
			skus = append(skus, l.SKU)
			switch {
			case l.Available == 0:
				sawStock["out"] = true
			case l.Available <= 5:
				sawStock["low"] = true
			default:
				sawStock["in"] = true
			}
		}
		if st.OrderID != id || !slices.Equal(skus, orderSKUs) {
			t.Fatalf("%s: stock SKUs %v, order SKUs %v", id, skus, orderSKUs)
		}

		cl := CouponsFor(id)
		sawCoupons[len(cl.Coupons)] = true
		if cl.OrderID != id || cl.Coupons == nil || len(cl.Coupons) > 3 {
			t.Fatalf("%s: coupons %+v", id, cl)
		}
		var codes []string
		for _, c := range cl.Coupons {
			if c.Code == "" || slices.Contains(codes, c.Code) || c.DiscountCents < 0 || c.DiscountCents > o.TotalCents || !c.ExpiresAt.After(o.CreatedAt) {
				t.Fatalf("%s: bad coupon %+v for order total %d", id, c, o.TotalCents)
			}
			codes = append(codes, c.Code)
		}

		sh := ShipmentFor(id)
		sawStatus[sh.Status] = true
		want := map[string][]string{
			"PLACED": {"PREPARING"}, "PAID": {"PREPARING"},
			"SHIPPED":   {"IN_TRANSIT", "OUT_FOR_DELIVERY"},
			"DELIVERED": {"DELIVERED"},
		}[o.Status]
		if sh.OrderID != id || !slices.Contains(want, sh.Status) || sh.Carrier == "" || sh.ETA == nil {
			t.Fatalf("%s: shipment %+v for order status %s", id, sh, o.Status)
		}
		if (sh.Status == "PREPARING") != (sh.TrackingNumber == "" && len(sh.Events) == 0) {
			t.Fatalf("%s: %s shipment with tracking %q and %d events", id, sh.Status, sh.TrackingNumber, len(sh.Events))
		}
		prev := o.CreatedAt
		for _, e := range sh.Events {
			if !e.At.After(prev) || e.Location == "" || e.Description == "" {
				t.Fatalf("%s: event %+v out of order or incomplete", id, e)
			}
			prev = e.At
		}
	}
	if len(sawStatus) != 4 || len(sawCoupons) != 4 || len(sawStock) != 3 {
		t.Errorf("500 ids show too little variety: statuses %v, coupon counts %v, stock levels %v", sawStatus, sawCoupons, sawStock)
	}
}

func TestUnknownOrdersAre404(t *testing.T) {
	s := New()
	for _, svc := range Services() {
		w := do(t, s, http.MethodGet, servicePath(svc, "nf-123"), "")
		if w.Code != http.StatusNotFound || errorCode(t, w) != "NOT_FOUND" {
			t.Errorf("%s: status %d body %s, want 404 NOT_FOUND", svc, w.Code, w.Body)
		}
	}
}

func TestRoutingErrors(t *testing.T) {
	s := New()
	for _, tt := range []struct {
		method, path string
		status       int
		code         string // "" when net/http writes the answer
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, ""},
		{http.MethodGet, "/order/v2/orders/o-1", http.StatusNotFound, ""},
		{http.MethodPost, "/order/v1/orders/o-1", http.StatusMethodNotAllowed, ""},
		{http.MethodPost, "/stats", http.StatusMethodNotAllowed, ""},
		{http.MethodPost, "/faults", http.StatusMethodNotAllowed, ""},
		{http.MethodPost, "/faults/order", http.StatusMethodNotAllowed, ""},
		{http.MethodGet, "/faults/payment", http.StatusBadRequest, "UNKNOWN_SERVICE"},
		{http.MethodPut, "/faults/payment", http.StatusBadRequest, "UNKNOWN_SERVICE"},
		{http.MethodDelete, "/faults/payment", http.StatusBadRequest, "UNKNOWN_SERVICE"},
	} {
		w := do(t, s, tt.method, tt.path, `{"hang":true}`)
		if w.Code != tt.status {
			t.Errorf("%s %s: status = %d, want %d (body %s)", tt.method, tt.path, w.Code, tt.status, w.Body)
		} else if tt.code != "" && errorCode(t, w) != tt.code {
			t.Errorf("%s %s: body %s, want code %s", tt.method, tt.path, w.Body, tt.code)
		}
	}
	if got := s.Faults(); !equalFaults(got, allHealthy()) {
		t.Errorf("faults changed: %+v", got)
	}
}

func TestFaultAPI(t *testing.T) {
	s := New()
	w := do(t, s, http.MethodPut, "/faults/coupon", `{"latency_ms":250,"error_rate":0.25}`)
	want := Fault{LatencyMS: 250, ErrorRate: 0.25, ErrorStatus: 500}
	if got := decodeJSON[Fault](t, w); w.Code != http.StatusOK || got != want {
		t.Errorf("PUT answered %d %+v, want %+v (omitted fields take defaults)", w.Code, got, want)
	}
	if w := do(t, s, http.MethodPut, "/faults/order", `{"hang":true,"error_status":503,"jitter_ms":null}`); w.Code != http.StatusOK {
		t.Fatalf("PUT: %d %s", w.Code, w.Body)
	}
	wantAll := allHealthy()
	wantAll[ServiceCoupon], wantAll[ServiceOrder] = want, Fault{Hang: true, ErrorStatus: 503}
	if got := decodeJSON[map[string]Fault](t, do(t, s, http.MethodGet, "/faults", "")); !equalFaults(got, wantAll) {
		t.Errorf("GET /faults = %+v, want %+v", got, wantAll)
	}
	if !equalFaults(s.Faults(), wantAll) {
		t.Errorf("Faults() = %+v, want %+v", s.Faults(), wantAll)
	}
	if got := decodeJSON[Fault](t, do(t, s, http.MethodGet, "/faults/coupon", "")); got != want {
		t.Errorf("GET /faults/coupon = %+v, want %+v", got, want)
	}
	// A PUT replaces the whole fault: omitted fields go back to defaults.
	do(t, s, http.MethodPut, "/faults/coupon", `{"corrupt":true}`)
	if got := s.Faults()[ServiceCoupon]; got != (Fault{Corrupt: true, ErrorStatus: 500}) {
		t.Errorf("after second PUT: %+v", got)
	}
	w = do(t, s, http.MethodDelete, "/faults/coupon", "")
	if got := decodeJSON[Fault](t, w); w.Code != http.StatusOK || got != healthy || !s.Faults()[ServiceOrder].Hang {
		t.Errorf("DELETE /faults/coupon: %d %+v, faults %+v", w.Code, got, s.Faults())
	}
	w = do(t, s, http.MethodDelete, "/faults", "")
	if got := decodeJSON[map[string]Fault](t, w); w.Code != http.StatusOK || !equalFaults(got, allHealthy()) {
		t.Errorf("DELETE /faults: %d %+v", w.Code, got)
	}
}

func TestBadFaultBodiesChangeNothing(t *testing.T) {
	for _, tt := range []struct{ name, body string }{
		{"unknown field", `{"latency":100}`},
		{"wrong type", `{"latency_ms":"100"}`},
		{"fractional ms", `{"latency_ms":1.5}`},
		{"bool as number", `{"hang":1}`},
		{"negative latency", `{"latency_ms":-1}`},
		{"huge latency", `{"latency_ms":600001}`},
		{"negative jitter", `{"jitter_ms":-5}`},
		{"rate above one", `{"error_rate":1.01}`},
		{"negative rate", `{"error_rate":-0.1}`},
		{"status below 400", `{"error_status":200}`},
		{"negative status", `{"error_status":-500}`},
		{"status above 599", `{"error_status":600}`},
		{"trailing data", `{"hang":true} {"hang":false}`},
		{"trailing garbage", `{"hang":true}x`},
		{"trailing brace", `{"hang":true}}`},
		{"array", `[{"hang":true}]`},
		{"null", `null`},
		{"number", `7`},
		{"empty", ``},
		{"not json", `hang=true`},
		{"truncated", `{"hang":true`},
		{"huge body", `{"latency_ms":1` + strings.Repeat(" ", maxFaultBody) + `}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			before := Fault{LatencyMS: 10, ErrorStatus: 502}
			mustSet(t, s, ServiceInventory, before)
			w := do(t, s, http.MethodPut, "/faults/inventory", tt.body)
			if w.Code != http.StatusBadRequest || errorCode(t, w) != "INVALID_FAULT" {
				t.Errorf("status = %d, body %s, want 400 INVALID_FAULT", w.Code, w.Body)
			}
			if got := s.Faults()[ServiceInventory]; got != before {
				t.Errorf("fault changed to %+v", got)
			}
		})
	}
}

func TestSetFault(t *testing.T) {
	nan := math.NaN()
	for _, tt := range []struct {
		name    string
		service string
		fault   Fault
		wantErr error
		want    Fault
	}{
		{"zero status defaults", ServiceLogistics, Fault{ErrorRate: 1}, nil, Fault{ErrorRate: 1, ErrorStatus: 500}},
		{"kept status", ServiceLogistics, Fault{ErrorStatus: 429}, nil, Fault{ErrorStatus: 429}},
		{"unknown service", "payment", Fault{}, ErrUnknownService, healthy},
		{"NaN rate", ServiceLogistics, Fault{ErrorRate: nan}, ErrInvalidFault, healthy},
		{"bad status", ServiceLogistics, Fault{ErrorStatus: 302}, ErrInvalidFault, healthy},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			err := s.SetFault(tt.service, tt.fault)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got := s.Faults()[ServiceLogistics]; got != tt.want {
				t.Errorf("fault = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// timed serves one request in the test's synctest bubble and returns the
// answer and how long, on the bubble's clock, it took.
func timed(t *testing.T, s *Server, path string, header ...string) (*httptest.ResponseRecorder, time.Duration) {
	t.Helper()
	start := time.Now()
	w := do(t, s, http.MethodGet, path, "", header...)
	return w, time.Since(start)
}

func TestLatencyAndJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		mustSet(t, s, ServiceOrder, Fault{LatencyMS: 120, JitterMS: 30})
		var waits []time.Duration
		for range 50 {
			w, d := timed(t, s, servicePath(ServiceOrder, "o-1"))
			if w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
			waits = append(waits, d)
		}
		lo, hi := slices.Min(waits), slices.Max(waits)
		if lo < 120*time.Millisecond || hi > 150*time.Millisecond || hi-lo < 10*time.Millisecond {
			t.Errorf("waits span [%v, %v], want within [120ms, 150ms] and spread by the jitter", lo, hi)
		}
		if _, d := timed(t, s, servicePath(ServiceCoupon, "o-1")); d != 0 {
			t.Errorf("a healthy service waited %v", d)
		}
	})
}

func TestBudgetHeader(t *testing.T) {
	for _, tt := range []struct {
		name     string
		fault    Fault
		budget   string
		wantWait time.Duration
		status   int
	}{
		{"latency within budget", Fault{LatencyMS: 100}, "300", 100 * time.Millisecond, http.StatusOK},
		{"latency beyond budget", Fault{LatencyMS: 500}, "120", 120 * time.Millisecond, http.StatusGatewayTimeout},
		{"latency equal to budget", Fault{LatencyMS: 120}, "120", 120 * time.Millisecond, http.StatusGatewayTimeout},
		{"zero budget", Fault{LatencyMS: 50}, "0", 0, http.StatusGatewayTimeout},
		{"hang with budget", Fault{Hang: true}, "80", 80 * time.Millisecond, http.StatusGatewayTimeout},
		{"malformed budget ignored", Fault{LatencyMS: 70}, "soon", 70 * time.Millisecond, http.StatusOK},
		{"negative budget ignored", Fault{LatencyMS: 70}, "-5", 70 * time.Millisecond, http.StatusOK},
		{"huge budget capped", Fault{Hang: true}, "99999999999999999", 24 * time.Hour, http.StatusGatewayTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New()
				mustSet(t, s, ServiceLogistics, tt.fault)
				w, d := timed(t, s, servicePath(ServiceLogistics, "o-9"), HeaderBudget, tt.budget)
				if w.Code != tt.status || (tt.status == http.StatusGatewayTimeout && errorCode(t, w) != "BUDGET_EXHAUSTED") {
					t.Fatalf("status = %d, want %d (%s)", w.Code, tt.status, w.Body)
				}
				if d != tt.wantWait {
					t.Errorf("waited %v, want %v", d, tt.wantWait)
				}
			})
		})
	}
}

func TestErrorRate(t *testing.T) {
	for _, tt := range []struct {
		rate     float64
		min, max int // failures of 200
	}{{0, 0, 0}, {1, 200, 200}, {0.5, 70, 130}} {
		count := func() int {
			s := New()
			mustSet(t, s, ServiceInventory, Fault{ErrorRate: tt.rate, ErrorStatus: 503})
			n := 0
			for range 200 {
				switch w := do(t, s, http.MethodGet, servicePath(ServiceInventory, "o-1"), ""); w.Code {
				case http.StatusServiceUnavailable:
					if errorCode(t, w) != "INJECTED_FAULT" {
						t.Fatalf("body %s", w.Body)
					}
					n++
				case http.StatusOK:
				default:
					t.Fatalf("status %d", w.Code)
				}
			}
			return n
		}
		n := count()
		if n < tt.min || n > tt.max {
			t.Errorf("rate %v: %d of 200 failed", tt.rate, n)
		}
		if again := count(); again != n {
			t.Errorf("rate %v: two servers gave %d then %d failures", tt.rate, n, again)
		}
	}
}

func TestInjectedErrorComesBeforeNotFound(t *testing.T) {
	s := New()
	mustSet(t, s, ServiceOrder, Fault{ErrorRate: 1, ErrorStatus: 502})
	if w := do(t, s, http.MethodGet, servicePath(ServiceOrder, "nf-1"), ""); w.Code != http.StatusBadGateway {
		t.Errorf("status = %d, want 502", w.Code)
	}
}

func TestCorruptBodiesAreNotJSON(t *testing.T) {
	s := New()
	for _, svc := range Services() {
		mustSet(t, s, svc, Fault{Corrupt: true})
		for _, id := range []string{"o-1", "o-2", "x"} {
			w := do(t, s, http.MethodGet, servicePath(svc, id), "")
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%s: status %d, Content-Type %q", svc, w.Code, w.Header().Get("Content-Type"))
			}
			if json.Valid(w.Body.Bytes()) {
				t.Errorf("%s %s: corrupt body %q is JSON", svc, id, w.Body)
			}
		}
	}
}

// A hang holds the request until its client goes away, and then answers
// nothing.
func TestHangEndsWhenClientGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		mustSet(t, s, ServiceCoupon, Fault{Hang: true})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- doCtx(t, ctx, s, http.MethodGet, servicePath(ServiceCoupon, "o-1"), "") }()
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case w := <-done:
			t.Fatalf("hang ended before the client went away: %d %s", w.Code, w.Body)
		default:
		}
		cancel()
		if w := <-done; w.Body.Len() != 0 {
			t.Errorf("answered %d %s to a client that went away", w.Code, w.Body)
		}
		if n := s.Stats()[ServiceCoupon].Requests; n != 1 {
			t.Errorf("requests = %d, want 1", n)
		}
	})
}

// A hang over a real connection ends when the client leaves: closing the
// server, which waits for its handlers, returns.
func TestHangOverNetwork(t *testing.T) {
	s := New()
	mustSet(t, s, ServiceOrder, Fault{Hang: true})
	ts := httptest.NewServer(s)
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+servicePath(ServiceOrder, "o-1"), nil)
	resp, err := ts.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got %d, want the client's leaving to end the request", resp.StatusCode)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
}

func TestCloseReleasesHeldRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New()
		mustSet(t, s, ServiceLogistics, Fault{Hang: true})
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range codes {
			wg.Go(func() { codes[i] = do(t, s, http.MethodGet, servicePath(ServiceLogistics, "o-1"), "").Code })
		}
		synctest.Wait()
		s.Close()
		wg.Wait()
		if codes[0] != http.StatusServiceUnavailable || codes[1] != http.StatusServiceUnavailable {
			t.Errorf("held requests got %v, want 503s", codes)
		}
		// After Close, waits end at once with 503; other requests are served.
		mustSet(t, s, ServiceLogistics, Fault{LatencyMS: 10})
		if w, d := timed(t, s, servicePath(ServiceLogistics, "o-1")); w.Code != http.StatusServiceUnavailable || d != 0 {
			t.Errorf("waiting request after Close: %d after %v", w.Code, d)
		}
		if c := do(t, s, http.MethodGet, servicePath(ServiceOrder, "o-1"), "").Code; c != http.StatusOK {
			t.Errorf("plain request after Close: %d", c)
		}
		s.Close() // idempotent
	})
}

func TestStatsCountEveryRequest(t *testing.T) {
	synctest.Test(t, testStatsCountEveryRequest)
}

func testStatsCountEveryRequest(t *testing.T) {
	s := New()
	mustSet(t, s, ServiceInventory, Fault{ErrorRate: 1})
	mustSet(t, s, ServiceCoupon, Fault{Corrupt: true})
	mustSet(t, s, ServiceLogistics, Fault{Hang: true})
	get := func(path string, header ...string) { do(t, s, http.MethodGet, path, "", header...) }
	get(servicePath(ServiceOrder, "o-1"))
	get(servicePath(ServiceOrder, "nf-1"))
	do(t, s, http.MethodHead, servicePath(ServiceOrder, "o-1"), "")
	get(servicePath(ServiceInventory, "o-1"))
	get(servicePath(ServiceInventory, "o-2"))
	get(servicePath(ServiceCoupon, "o-1"))
	get(servicePath(ServiceLogistics, "o-1"), HeaderBudget, "10")
	get("/faults") // neither the fault API nor /stats counts
	get("/stats")
	get("/nowhere")
	want := map[string]ServiceStats{ServiceOrder: {3}, ServiceInventory: {2}, ServiceCoupon: {1}, ServiceLogistics: {1}}
	if got := decodeJSON[map[string]ServiceStats](t, do(t, s, http.MethodGet, "/stats", "")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GET /stats = %v, want %v", got, want)
	}
	if got := s.Stats(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Stats() = %v, want %v", got, want)
	}
}
