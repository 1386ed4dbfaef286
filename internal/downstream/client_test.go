package downstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
	"github.com/orderagg/orderagg/internal/sim"
)

// call runs the client of service for orderID and returns only the error.
func call(ctx context.Context, cl *Clients, service, orderID string) error {
	var err error
	switch service {
	case sim.ServiceOrder:
		_, err = cl.Order.Get(ctx, orderID)
	case sim.ServiceInventory:
		_, err = cl.Inventory.Get(ctx, orderID)
	case sim.ServiceCoupon:
		_, err = cl.Coupon.Get(ctx, orderID)
	case sim.ServiceLogistics:
		_, err = cl.Logistics.Get(ctx, orderID)
	default:
		panic(service)
	}
	return err
}

func TestClientsReturnTheSimulatorsData(t *testing.T) {
	s := startSim(t)
	cl := newClients(t, s.URL, Config{})
	ctx := context.Background()
	for i := range 30 {
		id := fmt.Sprintf("o-%d", 1000+i)
		o, err := cl.Order.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		so := sim.OrderFor(id)
		want := Order{
			ID: so.ID, UserID: so.UserID, Status: so.Status, CreatedAt: so.CreatedAt, Currency: so.Currency,
			TotalCents: so.TotalCents,
			ShippingAddress: Address{
				Name: so.ShippingAddress.Name, Line1: so.ShippingAddress.Line1, City: so.ShippingAddress.City,
				Postal: so.ShippingAddress.PostalCode, Country: so.ShippingAddress.Country,
			},
		}
		for _, it := range so.Items {
			want.Items = append(want.Items, OrderItem{SKU: it.SKU, Name: it.Name, Quantity: it.Quantity, UnitPriceCents: it.UnitPriceCents})
		}
		sameJSON(t, "order "+id, o, want)

		inv, err := cl.Inventory.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		wantInv := Inventory{Status: InventoryConfirmed}
		for _, l := range sim.StockFor(id).Items {
			wantInv.Items = append(wantInv.Items, StockItem{SKU: l.SKU, Available: &l.Available, Status: StockStatus(l.Available)})
		}
		sameJSON(t, "inventory "+id, inv, wantInv)
		if len(inv.Items) != len(o.Items) {
			t.Errorf("%s: %d stock items for %d order items", id, len(inv.Items), len(o.Items))
		}

		cp, err := cl.Coupon.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if cp.Items == nil {
			t.Errorf("%s: coupon Items is nil", id)
		}
		wantCp := Coupons{Items: []Coupon{}}
		for _, c := range sim.CouponsFor(id).Coupons {
			wantCp.Items = append(wantCp.Items, Coupon{Code: c.Code, Description: c.Description, DiscountCents: c.DiscountCents, ExpiresAt: c.ExpiresAt})
		}
		sameJSON(t, "coupons "+id, cp, wantCp)

		lg, err := cl.Logistics.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		sh := sim.ShipmentFor(id)
		wantLg := Logistics{Status: sh.Status, Carrier: sh.Carrier, TrackingNumber: sh.TrackingNumber, ETA: sh.ETA}
		for _, e := range sh.Events {
			wantLg.Events = append(wantLg.Events, ShipmentEvent{At: e.At, Location: e.Location, Description: e.Description})
		}
		sameJSON(t, "logistics "+id, lg, wantLg)
	}
}

func TestStockStatus(t *testing.T) {
	tests := []struct {
		available int
		want      string
	}{
		{0, StockOutOfStock},
		{1, StockLow},
		{5, StockLow},
		{6, StockInStock},
		{250, StockInStock},
	}
	for _, tt := range tests {
		if got := StockStatus(tt.available); got != tt.want {
			t.Errorf("StockStatus(%d) = %s, want %s", tt.available, got, tt.want)
		}
	}
}

// TestFaultsAreClassified drives each simulator fault through each client
// and checks how resilience reads the error.
func TestFaultsAreClassified(t *testing.T) {
	s := startSim(t)
	cl := newClients(t, s.URL, Config{})
	tests := []struct {
		name     string
		fault    sim.Fault
		id       string
		timeout  time.Duration
		kind     resilience.Kind
		notFound bool
		// status of the *StatusError: 0 if none, -1 if none or 504 (the
		// simulator's 504 BUDGET_EXHAUSTED and the client's own deadline
		// race to end a call that waits past the budget).
		status int
		is     error // a further errors.Is target
	}{
		{name: "500", fault: sim.Fault{ErrorRate: 1}, kind: resilience.KindFailure, status: 500},
		{name: "503", fault: sim.Fault{ErrorRate: 1, ErrorStatus: 503}, kind: resilience.KindFailure, status: 503},
		{name: "429", fault: sim.Fault{ErrorRate: 1, ErrorStatus: 429}, kind: resilience.KindFailure, status: 429},
		{name: "408", fault: sim.Fault{ErrorRate: 1, ErrorStatus: 408}, kind: resilience.KindFailure, status: 408},
		{name: "400", fault: sim.Fault{ErrorRate: 1, ErrorStatus: 400}, kind: resilience.KindBadRequest, status: 400},
		{name: "403", fault: sim.Fault{ErrorRate: 1, ErrorStatus: 403}, kind: resilience.KindBadRequest, status: 403},
		{name: "404 injected", fault: sim.Fault{ErrorRate: 1, ErrorStatus: 404}, kind: resilience.KindBadRequest, notFound: true, status: 404},
		{name: "nf- id", id: "nf-7", kind: resilience.KindBadRequest, notFound: true, status: 404},
		{name: "corrupt", fault: sim.Fault{Corrupt: true}, kind: resilience.KindFailure, is: ErrMalformed},
		{name: "hang", fault: sim.Fault{Hang: true}, timeout: 50 * time.Millisecond, kind: resilience.KindDeadline, status: -1, is: context.DeadlineExceeded},
		{name: "latency past deadline", fault: sim.Fault{LatencyMS: 5000}, timeout: 50 * time.Millisecond, kind: resilience.KindDeadline, status: -1, is: context.DeadlineExceeded},
		{name: "latency within deadline", fault: sim.Fault{LatencyMS: 20}, timeout: time.Second, kind: resilience.KindSuccess},
	}
	for _, tt := range tests {
		for _, svc := range bundled {
			t.Run(tt.name+"/"+svc, func(t *testing.T) {
				mustSetFault(t, s, svc, tt.fault)
				t.Cleanup(s.ResetFaults)
				ctx := context.Background()
				if tt.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				id := tt.id
				if id == "" {
					id = "o-42"
				}
				start := time.Now()
				err := call(ctx, cl, svc, id)
				if k := resilience.KindOf(err); k != tt.kind {
					t.Fatalf("kind = %v, want %v (err %v)", k, tt.kind, err)
				}
				if tt.timeout > 0 && time.Since(start) > tt.timeout+500*time.Millisecond {
					t.Errorf("took %v with a %v deadline", time.Since(start), tt.timeout)
				}
				if got := errors.Is(err, orderdetail.ErrNotFound); got != tt.notFound {
					t.Errorf("errors.Is(err, ErrNotFound) = %v, want %v (err %v)", got, tt.notFound, err)
				}
				var se *StatusError
				if tt.status == -1 {
					if errors.As(err, &se) && se.StatusCode != http.StatusGatewayTimeout {
						t.Errorf("status = %d, want none or 504", se.StatusCode)
					}
				} else if errors.As(err, &se) {
					if got := se.StatusCode; got != tt.status {
						t.Errorf("status = %d, want %d", got, tt.status)
					}
					if !strings.Contains(err.Error(), svc) || se.Code == "" {
						t.Errorf("error %v lacks the dependency or the code", err)
					}
				} else if tt.status != 0 {
					t.Errorf("no *StatusError in %v", err)
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Errorf("err %v is not %v", err, tt.is)
				}
				if err != nil && !strings.HasPrefix(err.Error(), "downstream: "+svc+" "+id+": ") {
					t.Errorf("err %q lacks the operation prefix", err)
				}
			})
		}
	}
}

func TestBudgetHeaderLetsTheSimulatorGiveUp(t *testing.T) {
	s := startSim(t)
	cl := newClients(t, s.URL, Config{})
	mustSetFault(t, s, sim.ServiceCoupon, sim.Fault{Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Millisecond)
	defer cancel()
	err := call(ctx, cl, sim.ServiceCoupon, "o-1")
	if !errors.Is(err, context.DeadlineExceeded) || resilience.KindOf(err) != resilience.KindDeadline {
		t.Fatalf("err = %v, want a deadline", err)
	}
}

func TestBudgetExhaustedIsADeadline(t *testing.T) {
	var code atomic.Value
	url := startHandler(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGatewayTimeout)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":"m"}}`, code.Load())
	})
	cl := newClients(t, url, Config{})
	tests := []struct {
		code string
		kind resilience.Kind
	}{
		{"BUDGET_EXHAUSTED", resilience.KindDeadline},
		{"UPSTREAM_TIMEOUT", resilience.KindFailure},
	}
	for _, tt := range tests {
		code.Store(tt.code)
		err := call(context.Background(), cl, sim.ServiceLogistics, "o-1")
		if k := resilience.KindOf(err); k != tt.kind {
			t.Errorf("504 %s: kind %v, want %v (err %v)", tt.code, k, tt.kind, err)
		}
	}
}

func TestRequestHeaders(t *testing.T) {
	var (
		mu  sync.Mutex
		got []*http.Request
	)
	url := startHandler(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	cl := newClients(t, url, Config{})

	// The caller's trace context goes on through OpenTelemetry's global
	// propagator, whether orderagg traces or not.
	prop := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prop) })
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := propagation.TraceContext{}.Extract(WithRequestID(context.Background(), "req-123"), propagation.MapCarrier{"traceparent": traceparent})
	ctx, cancel := context.WithTimeout(ctx, 800*time.Millisecond)
	defer cancel()
	_ = call(ctx, cl, sim.ServiceOrder, "o_1-X")
	_ = call(context.Background(), cl, sim.ServiceInventory, "o-2")

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d requests", len(got))
	}
	r := got[0]
	if r.Method != http.MethodGet || r.URL.Path != "/order/v1/orders/o_1-X" {
		t.Errorf("request %s %s", r.Method, r.URL.Path)
	}
	if r.Header.Get("Accept") != "application/json" || r.Header.Get(HeaderRequestID) != "req-123" || r.Header.Get("traceparent") != traceparent {
		t.Errorf("headers %v", r.Header)
	}
	ms, err := strconv.Atoi(r.Header.Get(HeaderBudget))
	if err != nil || ms <= 0 || ms > 800 {
		t.Errorf("%s = %q, want whole ms in (0, 800]", HeaderBudget, r.Header.Get(HeaderBudget))
	}
	r = got[1]
	if r.URL.Path != "/inventory/v1/orders/o-2/stock" {
		t.Errorf("path %s", r.URL.Path)
	}
	// Without a deadline of the caller's, the client's own timeout is the
	// budget: the answer is abandoned after it.
	ms, err = strconv.Atoi(r.Header.Get(HeaderBudget))
	if err != nil || ms <= 800 || ms > 2000 {
		t.Errorf("%s = %q without a deadline, want whole ms in (800, 2000]", HeaderBudget, r.Header.Get(HeaderBudget))
	}
	if _, ok := r.Header[HeaderRequestID]; ok {
		t.Errorf("%s sent without one in ctx", HeaderRequestID)
	}
	if _, ok := r.Header["Traceparent"]; ok {
		t.Errorf("traceparent sent without a trace in ctx")
	}
}

func TestIDsArePathEscaped(t *testing.T) {
	var path atomic.Value
	url := startHandler(t, func(w http.ResponseWriter, r *http.Request) {
		path.Store(r.URL.EscapedPath())
		w.WriteHeader(http.StatusNotFound)
	})
	cl := newClients(t, url, Config{})
	_ = call(context.Background(), cl, sim.ServiceCoupon, "a/b?c")
	if got, want := path.Load(), "/coupon/v1/orders/a%2Fb%3Fc/coupons"; got != want {
		t.Errorf("path = %v, want %s", got, want)
	}
}

func TestEndedContextSendsNothing(t *testing.T) {
	s := startSim(t)
	cl := newClients(t, s.URL, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, svc := range bundled {
		err := call(ctx, cl, svc, "o-1")
		if !errors.Is(err, context.Canceled) || resilience.KindOf(err) != resilience.KindDeadline {
			t.Errorf("%s: err = %v", svc, err)
		}
	}
	for svc, st := range s.Stats() {
		if st.Requests != 0 {
			t.Errorf("%s got %d requests", svc, st.Requests)
		}
	}
}

func TestEmptyOrderIDIsBadRequest(t *testing.T) {
	cl := newClients(t, "http://127.0.0.1:1", Config{})
	for _, svc := range bundled {
		if err := call(context.Background(), cl, svc, ""); resilience.KindOf(err) != resilience.KindBadRequest {
			t.Errorf("%s: err = %v", svc, err)
		}
	}
}

func TestTransportErrorsAreFailures(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		ts := httptest.NewServer(http.NotFoundHandler())
		url := ts.URL
		ts.Close()
		cl := newClients(t, url, Config{})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := call(ctx, cl, sim.ServiceOrder, "o-1")
		if !errors.Is(err, ErrTransport) || resilience.KindOf(err) != resilience.KindFailure {
			t.Errorf("err = %v (kind %v)", err, resilience.KindOf(err))
		}
	})
	// The response-header timeout is a net timeout, which matches
	// context.DeadlineExceeded; it must still read as the dependency's
	// failure while the caller's own deadline is far away.
	t.Run("response header timeout", func(t *testing.T) {
		url := startHandler(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		cl := newClients(t, url, Config{Timeout: 30 * time.Millisecond})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := call(ctx, cl, sim.ServiceLogistics, "o-1")
		if !errors.Is(err, ErrTransport) || errors.Is(err, context.DeadlineExceeded) || resilience.KindOf(err) != resilience.KindFailure {
			t.Errorf("err = %v (kind %v)", err, resilience.KindOf(err))
		}
	})
	t.Run("body cut short", func(t *testing.T) {
		url := startHandler(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "1000")
			_, _ = io.WriteString(w, `{"order_id":"o-1",`)
		})
		cl := newClients(t, url, Config{})
		err := call(context.Background(), cl, sim.ServiceCoupon, "o-1")
		if !errors.Is(err, ErrTransport) || resilience.KindOf(err) != resilience.KindFailure {
			t.Errorf("err = %v (kind %v)", err, resilience.KindOf(err))
		}
	})
}

func TestUnexpectedAnswersAreFailures(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		is      error
		status  int
	}{
		{"html", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, `<html>maintenance</html>`)
		}, ErrMalformed, 0},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, nil, http.StatusFound},
		{"204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }, nil, http.StatusNoContent},
		{"other order", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"order_id":"o-2","coupons":[]}`)
		}, ErrMalformed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newClients(t, startHandler(t, tt.handler), Config{})
			err := call(context.Background(), cl, sim.ServiceCoupon, "o-1")
			if resilience.KindOf(err) != resilience.KindFailure {
				t.Fatalf("err = %v (kind %v)", err, resilience.KindOf(err))
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err %v is not %v", err, tt.is)
			}
			var se *StatusError
			if tt.status != 0 && (!errors.As(err, &se) || se.StatusCode != tt.status) {
				t.Errorf("err %v, want status %d", err, tt.status)
			}
		})
	}
}

func TestBodyCap(t *testing.T) {
	const maxBody = 1 << 10
	valid := `{"order_id":"o-1","coupons":[]}`
	padded := func(n int) string { return valid + strings.Repeat(" ", n-len(valid)) }
	tests := []struct {
		name    string
		body    string
		chunked bool
		wantErr error
	}{
		{"at the cap", padded(maxBody), false, nil},
		{"at the cap, chunked", padded(maxBody), true, nil},
		{"one over", padded(maxBody + 1), false, ErrBodyTooLarge},
		{"one over, chunked", padded(maxBody + 1), true, ErrBodyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := startHandler(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if tt.chunked {
					for i := 0; i < len(tt.body); i += 100 {
						_, _ = io.WriteString(w, tt.body[i:min(i+100, len(tt.body))])
						w.(http.Flusher).Flush()
					}
					return
				}
				_, _ = io.WriteString(w, tt.body)
			})
			cl := newClients(t, url, Config{MaxBodyBytes: maxBody})
			err := call(context.Background(), cl, sim.ServiceCoupon, "o-1")
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestHugeBodyIsNotBuffered streams an endless body: the client must give
// up after its cap instead of reading (and holding) it all.
func TestHugeBodyIsNotBuffered(t *testing.T) {
	const attempt = 256 << 20
	var written atomic.Int64
	done := make(chan struct{})
	url := startHandler(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"order_id":"o-1","coupons":[`)
		chunk := []byte(strings.Repeat(`{"code":"X","description":"","discount_cents":1,"expires_at":"2025-01-01T00:00:00Z"},`, 400))
		for written.Load() < attempt {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	cl := newClients(t, url, Config{MaxBodyBytes: 64 << 10})
	err := call(context.Background(), cl, sim.ServiceCoupon, "o-1")
	if !errors.Is(err, ErrBodyTooLarge) || resilience.KindOf(err) != resilience.KindFailure {
		t.Fatalf("err = %v", err)
	}
	<-done
	t.Logf("server wrote %d bytes before the client hung up", written.Load())
	if n := written.Load(); n >= attempt/4 {
		t.Errorf("server wrote %d bytes before the client hung up", n)
	}
}

func TestDeclaredHugeBodyIsRefusedUnread(t *testing.T) {
	url := startHandler(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(10<<20))
		w.WriteHeader(http.StatusOK)
	})
	cl := newClients(t, url, Config{})
	err := call(context.Background(), cl, sim.ServiceOrder, "o-1")
	if !errors.Is(err, ErrBodyTooLarge) || !strings.Contains(err.Error(), "Content-Length") {
		t.Errorf("err = %v", err)
	}
}

// TestConnectionsAreReused makes calls that succeed, fail with a body,
// are not found and are corrupt, one after another: one connection must
// serve them all, which only happens if every body is drained and closed.
func TestConnectionsAreReused(t *testing.T) {
	s := startSim(t)
	cl := newClients(t, s.URL, Config{})
	ctx := context.Background()
	for i := range 40 {
		switch i % 4 {
		case 0:
			mustSetFault(t, s, sim.ServiceOrder, sim.Fault{})
		case 1:
			mustSetFault(t, s, sim.ServiceOrder, sim.Fault{ErrorRate: 1, ErrorStatus: 503})
		case 2:
			mustSetFault(t, s, sim.ServiceOrder, sim.Fault{Corrupt: true})
		}
		id := "o-1"
		if i%4 == 3 {
			id = "nf-1"
		}
		err := call(ctx, cl, sim.ServiceOrder, id)
		if (i%4 == 0) != (err == nil) {
			t.Fatalf("call %d: err = %v", i, err)
		}
	}
	if n := s.newConns.Load(); n != 1 {
		t.Errorf("%d connections for 40 sequential calls, want 1", n)
	}
	if n := s.Stats()[sim.ServiceOrder].Requests; n != 40 {
		t.Errorf("sim saw %d requests, want 40", n)
	}
}

// TestLargeErrorBodiesAreDrained answers errors whose bodies are larger than
// what the client reads for the error code: draining the rest is what keeps
// the connection reusable.
func TestLargeErrorBodiesAreDrained(t *testing.T) {
	var conns atomic.Int64
	url := startCounting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"error":{"code":"DOWN","message":"%s"}}`, strings.Repeat("x", 20<<10))
	}), &conns)
	cl := newClients(t, url, Config{})
	for range 10 {
		var se *StatusError
		if err := call(context.Background(), cl, sim.ServiceInventory, "o-1"); !errors.As(err, &se) || se.StatusCode != 503 {
			t.Fatalf("err = %v", err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 10 sequential calls, want 1", n)
	}
}

// TestPoolsAreSeparate hangs calls to inventory: the order client, with a
// pool of its own, is not affected; an inventory call beyond the idle pool
// is sent at once, not held for a connection (the guard's bulkhead bounds
// the calls, at the size in force), and ends with its caller's deadline.
// Failed before: the pool was capped at start-up (twice the bulkhead), and
// calls past it waited in the transport, reading as TIMEOUT, not REJECTED,
// after an admin PATCH raised max_concurrent.
func TestPoolsAreSeparate(t *testing.T) {
	s := startSim(t)
	cl := newClients(t, s.URL, Config{MaxIdleConns: 2})
	mustSetFault(t, s, sim.ServiceInventory, sim.Fault{Hang: true})

	hungCtx, release := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { _ = call(hungCtx, cl, sim.ServiceInventory, "o-1") })
	}
	defer func() {
		release()
		wg.Wait()
	}()
	waitFor(t, func() bool { return s.Stats()[sim.ServiceInventory].Requests == 4 })

	for range 5 {
		if err := call(context.Background(), cl, sim.ServiceOrder, "o-1"); err != nil {
			t.Fatalf("order call while inventory's calls hang: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := call(ctx, cl, sim.ServiceInventory, "o-1"); resilience.KindOf(err) != resilience.KindDeadline {
		t.Errorf("fifth inventory call: %v", err)
	}
	if n := s.Stats()[sim.ServiceInventory].Requests; n != 5 {
		t.Errorf("inventory saw %d requests, want 5: no call waits for a connection", n)
	}
}

// waitFor polls cond: the simulator's counters change on another goroutine
// with no event to wait on.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWrapTransport(t *testing.T) {
	s := startSim(t)
	var (
		mu   sync.Mutex
		deps []string
		seen []string
	)
	wrap := func(dep string, next http.RoundTripper) http.RoundTripper {
		mu.Lock()
		deps = append(deps, dep)
		mu.Unlock()
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			seen = append(seen, dep+" "+r.URL.Path)
			mu.Unlock()
			r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			return next.RoundTrip(r)
		})
	}
	cl := newClients(t, s.URL, Config{WrapTransport: wrap})
	for _, svc := range bundled {
		if err := call(context.Background(), cl, svc, "o-5"); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(deps, ","); got != "order,inventory,coupon,logistics" {
		t.Errorf("wrapped %s", got)
	}
	if len(seen) != 4 || seen[1] != "inventory /inventory/v1/orders/o-5/stock" {
		t.Errorf("wrapper saw %v", seen)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{BaseURL: "http://127.0.0.1:9100"}, true},
		{"path prefix and slash", Config{BaseURL: "https://sim.internal/api/"}, true},
		{"no base", Config{}, false},
		{"no scheme", Config{BaseURL: "127.0.0.1:9100"}, false},
		{"ftp", Config{BaseURL: "ftp://host"}, false},
		{"query", Config{BaseURL: "http://host/?x=1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient("order", orderAPI, tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if c != nil {
				c.Close()
			}
		})
	}
	if _, err := NewClients(Config{}, Endpoints{Order: "http://a", Inventory: "http://b", Coupon: "nope", Logistics: "http://d"}); err == nil ||
		!strings.Contains(err.Error(), "coupon") {
		t.Errorf("NewClients with a bad coupon URL: %v", err)
	}
}

func TestBaseURLWithPathPrefix(t *testing.T) {
	s := startSim(t)
	mux := http.NewServeMux()
	mux.Handle("/sim/", http.StripPrefix("/sim", s.Server))
	url := startHandler(t, mux.ServeHTTP)
	cl := newClients(t, url+"/sim/", Config{})
	if _, err := cl.Order.Get(context.Background(), "o-1"); err != nil {
		t.Fatal(err)
	}
}

func TestRequestIDContext(t *testing.T) {
	if got := RequestIDFrom(context.Background()); got != "" {
		t.Errorf("empty ctx has %q", got)
	}
	if got := RequestIDFrom(WithRequestID(context.Background(), "abc")); got != "abc" {
		t.Errorf("got %q", got)
	}
}

// BenchmarkTenMegabyteBody measures what a 10 MB answer costs the service:
// the body is refused after the 1 MiB cap, so B/op stays near the cap
// however large the answer is.
func BenchmarkTenMegabyteBody(b *testing.B) {
	chunk := bytes.Repeat([]byte(`{"id":"o-1","padding":"`+strings.Repeat("x", 4000)+`"},`), 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("["))
		for sent := 0; sent < 10<<20; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		w.Write([]byte("{}]"))
	}))
	defer ts.Close()
	c, err := NewClient("order", orderAPI, Config{BaseURL: ts.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Get(context.Background(), "o-1"); !errors.Is(err, ErrBodyTooLarge) {
			b.Fatalf("err %v, want ErrBodyTooLarge", err)
		}
	}
}

// Credentials in the base URL are sent as basic authentication, as
// http.Client would, and never as part of the request line.
func TestBaseURLCredentialsBecomeBasicAuth(t *testing.T) {
	var user, pass string
	var ok bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok = r.BasicAuth()
		http.Error(w, "nope", http.StatusTeapot)
	}))
	defer ts.Close()
	u := strings.Replace(ts.URL, "http://", "http://svc:s3cret@", 1)
	c, err := NewClient("order", orderAPI, Config{BaseURL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Get(context.Background(), "o-1")
	if !ok || user != "svc" || pass != "s3cret" {
		t.Errorf("server saw basic auth %v %q %q, want svc/s3cret", ok, user, pass)
	}
}
