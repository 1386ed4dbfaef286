package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/orderagg/orderagg/internal/resilience"
)

const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerParent = "00f067aa0ba902b7"
	traceparent  = "00-" + callerTrace + "-" + callerParent + "-01"
)

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// downstream is a fake dependency that records the traceparent it was sent.
type downstream struct {
	srv *httptest.Server
	got atomic.Value // string
}

func newDownstream(t *testing.T) *downstream {
	d := &downstream{}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.got.Store(r.Header.Get("traceparent"))
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *downstream) traceparent() string { s, _ := d.got.Load().(string); return s }

// client sends through tel's transport; its idle connections are closed at
// cleanup so no goroutine outlives the test.
func client(t *testing.T, tel *Telemetry, dep string) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tel.WrapTransport(dep, tr)}
}

func get(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return res.Body.Close()
}

// TestRequestTrace serves one order-detail-shaped request through the
// middleware: four guarded dependencies called in parallel, inventory failing
// once and retried, coupon failing and falling back. Every dependency span
// is a child of the server span, which continues the caller's trace; the
// HTTP client span carries the trace downstream.
func TestRequestTrace(t *testing.T) {
	h := newHarness(t)
	lis := h.tel.Listener()
	ds := newDownstream(t)
	orderClient := client(t, h.tel, "order")

	guard := func(name string) *resilience.Guard {
		g, err := resilience.New(name, resilience.Config{Retry: resilience.RetryConfig{MaxAttempts: 2}},
			resilience.WithListener(lis), resilience.WithClock(instantClock{}), resilience.WithTracerProvider(h.tel.TracerProvider()))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	var inventoryCalls atomic.Int32
	calls := map[string]func(context.Context) (int, error){
		"order": func(ctx context.Context) (int, error) { return 1, get(ctx, orderClient, ds.srv.URL+"/orders/o-1") },
		"inventory": func(context.Context) (int, error) {
			if inventoryCalls.Add(1) == 1 {
				return 0, errors.New("503 from inventory")
			}
			return 1, nil
		},
		"coupon":    func(context.Context) (int, error) { return 0, resilience.BadRequest(errors.New("404")) },
		"logistics": func(context.Context) (int, error) { return 1, nil },
	}
	guards := map[string]*resilience.Guard{}
	for name := range calls {
		guards[name] = guard(name)
	}

	e := echo.New()
	e.Use(h.tel.Middleware())
	e.GET("/v1/orders/:id", func(c echo.Context) error {
		ctx := c.Request().Context()
		h.log.InfoContext(ctx, "serving")
		var wg sync.WaitGroup
		for name, fn := range calls {
			wg.Go(func() {
				_, err := resilience.Do(ctx, guards[name], fn)
				if err != nil {
					_, _ = resilience.Fallback(ctx, guards[name], err, func(context.Context, error) (int, error) { return 0, nil })
				}
			})
		}
		wg.Wait()
		c.Response().Header().Set(echo.HeaderXRequestID, "req-42")
		h.tel.RecordRequest(ctx, http.StatusOK, true, 0)
		return c.JSON(http.StatusOK, map[string]string{"order_id": c.Param("id")})
	})

	req := httptest.NewRequest(http.MethodGet, "/v1/orders/o-1", nil)
	req.Header.Set("traceparent", traceparent)
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}

	spans := h.spans.GetSpans()
	var server tracetest.SpanStub
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindServer {
			server = s
		}
	}
	if server.Name != "GET /v1/orders/:id" {
		t.Fatalf("server span %q; spans: %v", server.Name, names(spans))
	}
	if got := server.SpanContext.TraceID().String(); got != callerTrace {
		t.Errorf("server span trace %s, want the caller's %s", got, callerTrace)
	}
	if got := server.Parent.SpanID().String(); got != callerParent || !server.Parent.IsRemote() {
		t.Errorf("server span parent %s (remote %v), want the caller's %s", got, server.Parent.IsRemote(), callerParent)
	}
	sa := attrs(server)
	if sa["http.route"].AsString() != "/v1/orders/:id" || sa["http.response.status_code"].AsInt64() != 200 ||
		sa["orderagg.request_id"].AsString() != "req-42" || !sa["orderagg.degraded"].AsBool() {
		t.Errorf("server span attributes %v", sa)
	}

	// The tree: server span → the guard's call span → HTTP client span,
	// and the fallback beside the call it stands in for.
	got := treeLines(spans)
	want := []string{
		"GET /v1/orders/:id",
		"GET /v1/orders/:id > dependency coupon event=bad_request",
		"GET /v1/orders/:id > dependency inventory event=success",
		"GET /v1/orders/:id > dependency logistics event=success",
		"GET /v1/orders/:id > dependency order event=success",
		"GET /v1/orders/:id > dependency order > order GET",
		"GET /v1/orders/:id > fallback coupon event=fallback_success",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("trace tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
		if s.EndTime.Before(s.StartTime) {
			t.Errorf("span %q ends before it starts", s.Name)
		}
		if dep := attrs(s)["orderagg.dependency"].AsString(); s.SpanKind != trace.SpanKindServer && !strings.Contains(s.Name, dep) {
			t.Errorf("span %q: orderagg.dependency = %q", s.Name, dep)
		}
	}
	// The retried call's span holds one attempt event per attempt.
	var attempts []string
	for _, ev := range byName["dependency inventory"].Events {
		if ev.Name == "attempt" {
			m := map[attribute.Key]attribute.Value{}
			for _, kv := range ev.Attributes {
				m[kv.Key] = kv.Value
			}
			attempts = append(attempts, m["orderagg.attempt"].String()+" "+m["orderagg.event"].String())
		}
	}
	if !slices.Equal(attempts, []string{"1 failure", "2 success"}) {
		t.Errorf("inventory's attempt events %q, want a failure then a success", attempts)
	}

	// The downstream received the client span's context, in the caller's trace.
	tp := ds.traceparent()
	client := byName["order GET"]
	if !strings.Contains(tp, callerTrace) || !strings.Contains(tp, client.SpanContext.SpanID().String()) {
		t.Errorf("downstream got traceparent %q, want trace %s span %s", tp, callerTrace, client.SpanContext.SpanID())
	}

	// The handler's log line carries the server span's ids.
	var found bool
	for _, l := range h.logs.jsonLines(t) {
		if l["msg"] == "serving" {
			found = true
			if l["trace_id"] != callerTrace || l["span_id"] != server.SpanContext.SpanID().String() {
				t.Errorf("log line %v lacks the server span's ids", l)
			}
		}
	}
	if !found {
		t.Errorf("no log line from the handler:\n%s", h.logs)
	}
}

// treeLines renders each span as the path of names from its trace's root
// down to it, with its event, attempt number and error status, sorted.
func treeLines(spans tracetest.SpanStubs) []string {
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	var out []string
	for _, s := range spans {
		path := s.Name
		for p, ok := byID[s.Parent.SpanID()]; ok; p, ok = byID[p.Parent.SpanID()] {
			path = p.Name + " > " + path
		}
		a := attrs(s)
		if ev, ok := a["orderagg.event"]; ok {
			path += " event=" + ev.String()
		}
		if n, ok := a["orderagg.attempt"]; ok {
			path += " attempt=" + n.String()
		}
		if s.Status.Code == codes.Error && s.SpanKind != trace.SpanKindServer {
			path += " ERROR"
		}
		out = append(out, path)
	}
	slices.Sort(out)
	return out
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// TestMiddlewareErrorStatus: a handler's error reaches echo's error handler
// once, and the span records the status actually sent.
func TestMiddlewareErrorStatus(t *testing.T) {
	h := newHarness(t)
	e := echo.New()
	var handled atomic.Int32
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		handled.Add(1)
		var he *echo.HTTPError
		if errors.As(err, &he) {
			_ = c.JSON(he.Code, map[string]any{"error": map[string]string{"code": "ORDER_UNAVAILABLE"}})
		}
	}
	e.Use(h.tel.Middleware())
	e.GET("/v1/orders/:id", func(echo.Context) error { return echo.NewHTTPError(http.StatusServiceUnavailable) })
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/orders/o-1", nil))
	if rec.Code != http.StatusServiceUnavailable || handled.Load() != 1 {
		t.Fatalf("status %d, error handler ran %d times; want 503 once", rec.Code, handled.Load())
	}
	spans := h.spans.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("spans %v", names(spans))
	}
	s := spans[0]
	if s.Status.Code != codes.Error || attrs(s)["http.response.status_code"].AsInt64() != 503 {
		t.Errorf("span status %v attributes %v", s.Status, attrs(s))
	}
	if s.Parent.IsValid() {
		t.Errorf("a request without traceparent should start a new trace, got parent %v", s.Parent)
	}
}

func TestMiddlewareSkipsProbes(t *testing.T) {
	h := newHarness(t)
	e := echo.New()
	e.Use(h.tel.Middleware())
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/dashboard", "/dashboard/events"} {
		e.GET(p, func(c echo.Context) error { return c.NoContent(http.StatusOK) })
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/nowhere", nil))
	spans := h.spans.GetSpans()
	// An unknown route has no template: the span is named by the method
	// alone, so scanners probing random paths cannot mint span names.
	if len(spans) != 1 || spans[0].Name != "GET" {
		t.Fatalf("spans %v, want only the unknown route's, named GET", names(spans))
	}
	if _, ok := attrs(spans[0])["http.route"]; ok {
		t.Errorf("unknown route span has http.route: %v", attrs(spans[0]))
	}
}

// TestCacheLookupSpanEvent: a last-good lookup is an event on the span of
// the request.
func TestCacheLookupSpanEvent(t *testing.T) {
	h := newHarness(t)
	ctx, sp := h.tel.TracerProvider().Tracer("test").Start(context.Background(), "request")
	h.tel.Listener().CacheLookup(ctx, "logistics", "stale")
	sp.End()
	spans := h.spans.GetSpans()
	if len(spans) != 1 || len(spans[0].Events) != 1 {
		t.Fatalf("spans %+v", spans)
	}
	ev := spans[0].Events[0]
	m := map[attribute.Key]string{}
	for _, kv := range ev.Attributes {
		m[kv.Key] = kv.Value.String()
	}
	if ev.Name != "cache lookup" || m["orderagg.dependency"] != "logistics" || m["orderagg.cache.outcome"] != "stale" {
		t.Errorf("event %q %v", ev.Name, m)
	}
}

// TestTracesOff: with no exporter nothing is recorded, yet a caller's trace
// context still reaches the downstreams, so traces through orderagg do not
// break when only its neighbours trace.
func TestTracesOff(t *testing.T) {
	clearOTelEnv(t)
	tel, err := Setup(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	if _, ok := tel.TracerProvider().(*sdktrace.TracerProvider); ok {
		t.Fatal("traces off but the tracer provider is the SDK's")
	}
	if tr, ok := tel.WrapTransport("inventory", http.DefaultTransport).(*http.Transport); !ok || tr != http.DefaultTransport {
		t.Error("traces off, yet WrapTransport wraps the transport")
	}

	// The handler's context holds the caller's trace context, which the
	// downstream client passes on (internal/downstream's
	// TestRequestHeaders).
	var got trace.SpanContext
	e := echo.New()
	e.Use(tel.Middleware())
	e.GET("/v1/orders/:id", func(c echo.Context) error {
		got = trace.SpanContextFromContext(c.Request().Context())
		return nil
	})
	req := httptest.NewRequest(http.MethodGet, "/v1/orders/o-1", nil)
	req.Header.Set("traceparent", traceparent)
	e.ServeHTTP(httptest.NewRecorder(), req)
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(trace.ContextWithSpanContext(context.Background(), got), carrier)
	if carrier["traceparent"] != traceparent {
		t.Errorf("the handler's context holds %q, want the caller's %q", carrier["traceparent"], traceparent)
	}
	// Without a caller's context there is nothing to pass on.
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/orders/o-2", nil))
	if got.IsValid() {
		t.Errorf("the handler's context holds %v with no trace from the caller", got)
	}

	// And the listener still counts with traces off.
	tel.Listener().OnEvent(context.Background(), resilience.Event{Dependency: "inventory", Kind: resilience.KindSuccess, Attempt: 1})
	fams := scrape(t, tel)
	if got := mustSample(t, fams, "orderagg_dependency_events_total", map[string]string{"dependency": "inventory", "event": "success"}); got != 1 {
		t.Errorf("events = %v, want 1", got)
	}
}

// TestPropagatorIsGlobalW3C: the global propagator carries the W3C trace
// context and drops a caller's baggage.
func TestPropagatorIsGlobalW3C(t *testing.T) {
	h := newHarness(t)
	carrier := propagation.MapCarrier{"traceparent": traceparent, "baggage": "session=s3cr3t"}
	_ = h
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), carrier)
	if sc := trace.SpanContextFromContext(ctx); sc.TraceID().String() != callerTrace {
		t.Errorf("extracted %v", sc)
	}
	out := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, out)
	if out["baggage"] != "" || out["traceparent"] != traceparent { // a caller's baggage stays here
		t.Errorf("injected %v", out)
	}
}

// setupWith is Setup with an in-memory span exporter and cfg's proxies.
func setupWith(t *testing.T, cfg Config) (*Telemetry, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	cfg.SpanExporter = exp
	tel, err := Setup(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return tel, exp
}

// TestClientAddress: the server span's client.address is the peer's; a
// client's X-Forwarded-For is believed only when the peer is a trusted
// proxy, and then its nearest untrusted hop is the client.
func TestClientAddress(t *testing.T) {
	for _, c := range []struct {
		name    string
		trusted []string
		peer    string
		want    string
	}{
		{"no proxy trusted", nil, "192.0.2.1:5000", "192.0.2.1"},
		{"an untrusted peer", []string{"10.0.0.0/8"}, "192.0.2.1:5000", "192.0.2.1"},
		{"a trusted proxy", []string{"192.0.2.1"}, "192.0.2.1:5000", "198.51.100.7"},
		{"a chain of trusted proxies", []string{"192.0.2.0/24", "198.51.100.7"}, "192.0.2.1:5000", "203.0.113.9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tel, exp := setupWith(t, Config{TrustedProxies: c.trusted})
			e := echo.New()
			e.Use(tel.Middleware())
			e.GET("/v1/orders/:id", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
			req := httptest.NewRequest(http.MethodGet, "/v1/orders/o-1", nil)
			req.RemoteAddr = c.peer
			req.Header.Set("X-Forwarded-For", "198.18.0.66, 203.0.113.9, 198.51.100.7")
			e.ServeHTTP(httptest.NewRecorder(), req)
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("spans %v", names(spans))
			}
			if got := attrs(spans[0])["client.address"].AsString(); got != c.want {
				t.Errorf("client.address = %q, want %q", got, c.want)
			}
		})
	}
	if _, err := Setup(context.Background(), Config{TrustedProxies: []string{"proxy.local"}}); err == nil || !strings.Contains(err.Error(), "proxy.local") {
		t.Errorf("Setup with a trusted proxy that is no address: %v", err)
	}
}
