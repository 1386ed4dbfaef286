package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSleeper records the waits the server asks for and returns at once.
type fakeSleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (f *fakeSleeper) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.waits = append(f.waits, d)
	f.mu.Unlock()
	return ctx.Err()
}

func (f *fakeSleeper) recorded() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.waits)
}

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
	switch service {
	case ServiceOrder:
		return "/order/v1/orders/" + id
	case ServiceInventory:
		return "/inventory/v1/orders/" + id + "/stock"
	case ServiceCoupon:
		return "/coupon/v1/orders/" + id + "/coupons"
	case ServiceLogistics:
		return "/logistics/v1/orders/" + id + "/shipment"
	}
	panic("unknown service " + service)
}

func wantBody(service, id string) any {
	switch service {
	case ServiceOrder:
		return OrderFor(id)
	case ServiceInventory:
		return StockFor(id)
	case ServiceCoupon:
		return CouponsFor(id)
	default:
		return ShipmentFor(id)
	}
}

func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	var b errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	if b.Error.Code == "" || b.Error.Message == "" {
		t.Fatalf("error body %q lacks code or message", w.Body)
	}
	return b.Error.Code
}

func TestServicesAnswerTheirData(t *testing.T) {
	s := New()
	for _, svc := range Services() {
		for _, id := range []string{"o-1001", "A_b-9", "x"} {
			t.Run(svc+"/"+id, func(t *testing.T) {
				w := do(t, s, http.MethodGet, servicePath(svc, id), "")
				if w.Code != http.StatusOK {
					t.Fatalf("status = %d, body %s", w.Code, w.Body)
				}
				if ct := w.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q", ct)
				}
				want, _ := json.Marshal(wantBody(svc, id))
				if got := bytes.TrimSpace(w.Body.Bytes()); !bytes.Equal(got, want) {
					t.Errorf("body = %s, want %s", got, want)
				}
			})
		}
	}
}

func TestBodiesAreDeterministic(t *testing.T) {
	a, b := New(), New()
	for _, svc := range Services() {
		for _, id := range []string{"o-1", "o-2", "order-42"} {
			wa := do(t, a, http.MethodGet, servicePath(svc, id), "")
			wb := do(t, b, http.MethodGet, servicePath(svc, id), "")
			if !bytes.Equal(wa.Body.Bytes(), wb.Body.Bytes()) {
				t.Errorf("%s %s: two servers differ:\n%s\n%s", svc, id, wa.Body, wb.Body)
			}
		}
		w1 := do(t, a, http.MethodGet, servicePath(svc, "o-1"), "")
		w2 := do(t, a, http.MethodGet, servicePath(svc, "o-2"), "")
		if bytes.Equal(w1.Body.Bytes(), w2.Body.Bytes()) {
			t.Errorf("%s: o-1 and o-2 have the same body", svc)
		}
	}
}

// TestDataIsConsistent checks, over many ids, that the four services tell
// one story about each order.
func TestDataIsConsistent(t *testing.T) {
	var sawStatus = map[string]bool{}
	var sawCoupons = map[int]bool{}
	var sawStock = map[string]bool{}
	for i := range 500 {
		id := fmt.Sprintf("o-%d", i)
		o := OrderFor(id)
		if o.ID != id || o.UserID == "" || o.CreatedAt.IsZero() || o.Currency == "" || o.ShippingAddress.Country == "" {
			t.Fatalf("%s: incomplete order %+v", id, o)
		}
		if n := len(o.Items); n < 1 || n > 5 {
			t.Fatalf("%s: %d items", id, n)
		}
		var total int64
		for _, it := range o.Items {
			if !strings.HasPrefix(it.SKU, "SKU-") || len(it.SKU) != 8 || it.Quantity < 1 || it.UnitPriceCents <= 0 {
				t.Fatalf("%s: bad item %+v", id, it)
			}
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
		var orderSKUs []string
		for _, it := range o.Items {
			orderSKUs = append(orderSKUs, it.SKU)
		}
		if st.OrderID != id || !slices.Equal(skus, orderSKUs) {
			t.Fatalf("%s: stock SKUs %v, order SKUs %v", id, skus, orderSKUs)
		}

		cl := CouponsFor(id)
		sawCoupons[len(cl.Coupons)] = true
		if cl.OrderID != id || cl.Coupons == nil || len(cl.Coupons) > 3 {
			t.Fatalf("%s: coupons %+v", id, cl)
		}
		for _, c := range cl.Coupons {
			if c.Code == "" || c.DiscountCents < 0 || c.DiscountCents > o.TotalCents || !c.ExpiresAt.After(o.CreatedAt) {
				t.Fatalf("%s: bad coupon %+v for order total %d", id, c, o.TotalCents)
			}
		}

		sh := ShipmentFor(id)
		sawStatus[sh.Status] = true
		want := map[string][]string{
			"PLACED": {ShipmentPreparing}, "PAID": {ShipmentPreparing},
			"SHIPPED":   {ShipmentInTransit, ShipmentOutForDelivery},
			"DELIVERED": {ShipmentDelivered},
		}[o.Status]
		if sh.OrderID != id || !slices.Contains(want, sh.Status) || sh.Carrier == "" || sh.ETA == nil {
			t.Fatalf("%s: shipment %+v for order status %s", id, sh, o.Status)
		}
		if (sh.Status == ShipmentPreparing) != (sh.TrackingNumber == "" && len(sh.Events) == 0) {
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
	tests := []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, "NOT_FOUND"},
		{http.MethodGet, "/order/v2/orders/o-1", http.StatusNotFound, "NOT_FOUND"},
		{http.MethodPost, "/order/v1/orders/o-1", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED"},
		{http.MethodPost, "/stats", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED"},
		{http.MethodPost, "/faults", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED"},
		{http.MethodPost, "/faults/order", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED"},
		{http.MethodGet, "/faults/payment", http.StatusBadRequest, "UNKNOWN_SERVICE"},
		{http.MethodPut, "/faults/payment", http.StatusBadRequest, "UNKNOWN_SERVICE"},
		{http.MethodDelete, "/faults/payment", http.StatusBadRequest, "UNKNOWN_SERVICE"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			w := do(t, s, tt.method, tt.path, `{}`)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d (body %s)", w.Code, tt.status, w.Body)
			}
			if code := errorCode(t, w); code != tt.code {
				t.Errorf("code = %s, want %s", code, tt.code)
			}
		})
	}
	if got := s.Faults(); !equalFaults(got, allHealthy()) {
		t.Errorf("faults changed: %+v", got)
	}
}

func allHealthy() map[string]Fault {
	m := map[string]Fault{}
	for _, svc := range services {
		m[svc] = healthy
	}
	return m
}

func equalFaults(a, b map[string]Fault) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func decodeJSON[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("decoding %s: %v", w.Body, err)
	}
	return v
}

func TestFaultAPI(t *testing.T) {
	s := New()

	w := do(t, s, http.MethodPut, "/faults/coupon", `{"latency_ms":250,"error_rate":0.25}`)
	if w.Code != http.StatusOK {
		t.Fatalf("PUT: %d %s", w.Code, w.Body)
	}
	want := Fault{LatencyMS: 250, ErrorRate: 0.25, ErrorStatus: 500}
	if got := decodeJSON[Fault](t, w); got != want {
		t.Errorf("PUT answered %+v, want %+v (omitted fields take defaults)", got, want)
	}
	w = do(t, s, http.MethodPut, "/faults/order", `{"hang":true,"error_status":503,"jitter_ms":null}`)
	if w.Code != http.StatusOK {
		t.Fatalf("PUT: %d %s", w.Code, w.Body)
	}

	w = do(t, s, http.MethodGet, "/faults", "")
	got := decodeJSON[map[string]Fault](t, w)
	wantAll := allHealthy()
	wantAll[ServiceCoupon] = want
	wantAll[ServiceOrder] = Fault{Hang: true, ErrorStatus: 503}
	if !equalFaults(got, wantAll) {
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
	if got := decodeJSON[Fault](t, w); w.Code != http.StatusOK || got != healthy {
		t.Errorf("DELETE /faults/coupon: %d %+v", w.Code, got)
	}
	if got := s.Faults()[ServiceOrder]; !got.Hang {
		t.Errorf("DELETE /faults/coupon touched order: %+v", got)
	}

	w = do(t, s, http.MethodDelete, "/faults", "")
	if got := decodeJSON[map[string]Fault](t, w); w.Code != http.StatusOK || !equalFaults(got, allHealthy()) {
		t.Errorf("DELETE /faults: %d %+v", w.Code, got)
	}
}

func TestBadFaultBodiesChangeNothing(t *testing.T) {
	tests := []struct{ name, body string }{
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
		{"status above 599", `{"error_status":600}`},
		{"trailing data", `{"hang":true} {"hang":false}`},
		{"trailing garbage", `{"hang":true}x`},
		{"array", `[{"hang":true}]`},
		{"null", `null`},
		{"empty", ``},
		{"not json", `hang=true`},
		{"truncated", `{"hang":true`},
		{"huge body", `{"latency_ms":1` + strings.Repeat(" ", maxFaultBody) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			before := Fault{LatencyMS: 10, ErrorStatus: 502}
			if err := s.SetFault(ServiceInventory, before); err != nil {
				t.Fatal(err)
			}
			w := do(t, s, http.MethodPut, "/faults/inventory", tt.body)
			if w.Code != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400 (body %s)", w.Code, w.Body)
			}
			if code := errorCode(t, w); code != "INVALID_FAULT" {
				t.Errorf("code = %s", code)
			}
			if got := s.Faults()[ServiceInventory]; got != before {
				t.Errorf("fault changed to %+v", got)
			}
		})
	}
}

func TestSetFault(t *testing.T) {
	tests := []struct {
		name    string
		service string
		fault   Fault
		wantErr error
		want    Fault
	}{
		{"zero status defaults", ServiceLogistics, Fault{ErrorRate: 1}, nil, Fault{ErrorRate: 1, ErrorStatus: 500}},
		{"kept status", ServiceLogistics, Fault{ErrorStatus: 429}, nil, Fault{ErrorStatus: 429}},
		{"unknown service", "payment", Fault{}, ErrUnknownService, healthy},
		{"NaN rate", ServiceLogistics, Fault{ErrorRate: nan()}, ErrInvalidFault, healthy},
		{"bad status", ServiceLogistics, Fault{ErrorStatus: 302}, ErrInvalidFault, healthy},
	}
	for _, tt := range tests {
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

func nan() float64 { z := 0.0; return z / z }

func TestLatencyAndJitter(t *testing.T) {
	var fs fakeSleeper
	s := New(WithSleeper(fs.sleep), WithSeed(7))
	if err := s.SetFault(ServiceOrder, Fault{LatencyMS: 120, JitterMS: 30}); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if w := do(t, s, http.MethodGet, servicePath(ServiceOrder, "o-1"), ""); w.Code != http.StatusOK {
			t.Fatalf("status %d", w.Code)
		}
	}
	waits := fs.recorded()
	if len(waits) != 50 {
		t.Fatalf("%d waits, want 50", len(waits))
	}
	lo, hi := slices.Min(waits), slices.Max(waits)
	if lo < 120*time.Millisecond || hi > 150*time.Millisecond || hi-lo < 10*time.Millisecond {
		t.Errorf("waits span [%v, %v], want within [120ms, 150ms] and spread by the jitter", lo, hi)
	}
	// Other services are unaffected.
	do(t, s, http.MethodGet, servicePath(ServiceCoupon, "o-1"), "")
	if len(fs.recorded()) != 50 {
		t.Error("a healthy service waited")
	}
}

func TestBudgetHeader(t *testing.T) {
	tests := []struct {
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
		{"huge budget capped", Fault{Hang: true}, "99999999999999999", maxBudget, http.StatusGatewayTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fs fakeSleeper
			s := New(WithSleeper(fs.sleep))
			if err := s.SetFault(ServiceLogistics, tt.fault); err != nil {
				t.Fatal(err)
			}
			w := do(t, s, http.MethodGet, servicePath(ServiceLogistics, "o-9"), "", HeaderBudget, tt.budget)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d (%s)", w.Code, tt.status, w.Body)
			}
			if tt.status == http.StatusGatewayTimeout && errorCode(t, w) != "BUDGET_EXHAUSTED" {
				t.Errorf("body %s", w.Body)
			}
			if got := fs.recorded(); !slices.Equal(got, []time.Duration{tt.wantWait}) {
				t.Errorf("waits = %v, want [%v]", got, tt.wantWait)
			}
		})
	}
}

func TestErrorRate(t *testing.T) {
	tests := []struct {
		name         string
		fault        Fault
		wantFailures func(n int) bool
	}{
		{"never", Fault{ErrorRate: 0, ErrorStatus: 503}, func(n int) bool { return n == 0 }},
		{"always", Fault{ErrorRate: 1, ErrorStatus: 503}, func(n int) bool { return n == 200 }},
		{"half", Fault{ErrorRate: 0.5, ErrorStatus: 503}, func(n int) bool { return n > 70 && n < 130 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			count := func() int {
				s := New(WithSeed(42))
				if err := s.SetFault(ServiceInventory, tt.fault); err != nil {
					t.Fatal(err)
				}
				n := 0
				for range 200 {
					w := do(t, s, http.MethodGet, servicePath(ServiceInventory, "o-1"), "")
					switch w.Code {
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
			if !tt.wantFailures(n) {
				t.Errorf("%d of 200 failed", n)
			}
			if again := count(); again != n {
				t.Errorf("same seed gave %d then %d failures", n, again)
			}
		})
	}
}

func TestInjectedErrorComesBeforeNotFound(t *testing.T) {
	s := New()
	if err := s.SetFault(ServiceOrder, Fault{ErrorRate: 1, ErrorStatus: 502}); err != nil {
		t.Fatal(err)
	}
	if w := do(t, s, http.MethodGet, servicePath(ServiceOrder, "nf-1"), ""); w.Code != http.StatusBadGateway {
		t.Errorf("status = %d, want 502", w.Code)
	}
}

func TestCorruptBodiesAreRejectedByDecoders(t *testing.T) {
	s := New()
	for _, svc := range Services() {
		if err := s.SetFault(svc, Fault{Corrupt: true}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"o-1", "o-2", "x"} {
			w := do(t, s, http.MethodGet, servicePath(svc, id), "")
			if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%s: status %d, Content-Type %q", svc, w.Code, w.Header().Get("Content-Type"))
			}
			var v any
			if json.Valid(w.Body.Bytes()) || json.Unmarshal(w.Body.Bytes(), &v) == nil {
				t.Errorf("%s %s: corrupt body %q decodes", svc, id, w.Body)
			}
		}
	}
}

// TestHangEndsWhenClientGoes holds a request until its context is cancelled.
func TestHangEndsWhenClientGoes(t *testing.T) {
	s := New()
	started, ended := make(chan struct{}), make(chan struct{})
	s.onHoldStart = func() { close(started) }
	s.onHoldEnd = func() { close(ended) }
	if err := s.SetFault(ServiceCoupon, Fault{Hang: true}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- doCtx(t, ctx, s, http.MethodGet, servicePath(ServiceCoupon, "o-1"), "") }()
	<-started
	select {
	case <-ended:
		t.Fatal("hang ended before the client went away")
	default:
	}
	cancel()
	<-ended
	w := <-done
	if w.Body.Len() != 0 {
		t.Errorf("answered %d %s to a client that went away", w.Code, w.Body)
	}
	if n := s.Stats()[ServiceCoupon].Requests; n != 1 {
		t.Errorf("requests = %d, want 1", n)
	}
}

// TestHangOverNetwork runs a hang through a real connection: the client's
// deadline ends it, and closing the test server does not block.
func TestHangOverNetwork(t *testing.T) {
	s := New()
	started, ended := make(chan struct{}), make(chan struct{})
	s.onHoldStart = func() { close(started) }
	s.onHoldEnd = func() { close(ended) }
	if err := s.SetFault(ServiceOrder, Fault{Hang: true}); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	defer ts.Close()

	// The client leaves once the request is held, not after a clock: a
	// deadline could end it before the server even saw it (a loaded
	// machine is slow to dial), and then no hold would ever end.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-started:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+servicePath(ServiceOrder, "o-1"), nil)
	resp, err := ts.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got %d, want the client's leaving to end the request", resp.StatusCode)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	<-ended // the handler noticed the client leaving
}

func TestCloseReleasesHeldRequests(t *testing.T) {
	s := New()
	started := make(chan struct{}, 2)
	s.onHoldStart = func() { started <- struct{}{} }
	if err := s.SetFault(ServiceLogistics, Fault{Hang: true}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() {
			codes[i] = do(t, s, http.MethodGet, servicePath(ServiceLogistics, "o-1"), "").Code
		})
	}
	<-started
	<-started
	s.Close()
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusServiceUnavailable {
			t.Errorf("request %d: status %d, want 503", i, c)
		}
	}
	// After Close, waiting requests are refused at once, others still served.
	if c := do(t, s, http.MethodGet, servicePath(ServiceLogistics, "o-1"), "").Code; c != http.StatusServiceUnavailable {
		t.Errorf("held request after Close: %d", c)
	}
	if c := do(t, s, http.MethodGet, servicePath(ServiceOrder, "o-1"), "").Code; c != http.StatusOK {
		t.Errorf("plain request after Close: %d", c)
	}
	s.Close() // idempotent
}

func TestStatsCountEveryPhysicalRequest(t *testing.T) {
	var fs fakeSleeper
	s := New(WithSleeper(fs.sleep))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.SetFault(ServiceInventory, Fault{ErrorRate: 1}))
	must(s.SetFault(ServiceCoupon, Fault{Corrupt: true}))
	must(s.SetFault(ServiceLogistics, Fault{Hang: true}))

	get := func(path string, header ...string) { do(t, s, http.MethodGet, path, "", header...) }
	get(servicePath(ServiceOrder, "o-1"))
	get(servicePath(ServiceOrder, "nf-1"))
	do(t, s, http.MethodDelete, servicePath(ServiceOrder, "o-1"), "")
	get("/order/v1/unknown")
	get(servicePath(ServiceInventory, "o-1"))
	get(servicePath(ServiceInventory, "o-2"))
	get(servicePath(ServiceCoupon, "o-1"))
	get(servicePath(ServiceLogistics, "o-1"), HeaderBudget, "10")
	// Neither the fault API nor /stats counts.
	get("/faults")
	get("/stats")
	get("/nowhere")

	want := map[string]ServiceStats{
		ServiceOrder: {4}, ServiceInventory: {2}, ServiceCoupon: {1}, ServiceLogistics: {1},
	}
	w := do(t, s, http.MethodGet, "/stats", "")
	if got := decodeJSON[map[string]ServiceStats](t, w); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GET /stats = %v, want %v", got, want)
	}
	if got := s.Stats(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Stats() = %v, want %v", got, want)
	}
}

func TestTraceparentIsLogged(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	h := slog.NewJSONHandler(&lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug})
	s := New(WithLogger(slog.New(h)))
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	do(t, s, http.MethodGet, servicePath(ServiceInventory, "o-7"), "", "traceparent", tp)
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), tp) || !strings.Contains(buf.String(), `"level":"DEBUG"`) {
		t.Errorf("log %q lacks the traceparent at debug level", buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
