// Package telemetry is orderagg's OpenTelemetry wiring: traces, metrics in
// the Prometheus format, and the log lines that go with them. Setup reads
// the OTEL_* environment; the other packages' hooks (resilience.Listener,
// orderdetail.Observer, downstream.Config.WrapTransport, echo middleware)
// are filled here. docs/runbook.md names every metric, span and log line.
package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/time/rate"
)

const attrSpanDependency = attribute.Key("orderagg.dependency")

// Config sets up telemetry. The zero value is valid: traces follow the
// process environment, logs go to slog.Default and X-Forwarded-For is
// ignored.
type Config struct {
	ServiceVersion string                // service.version; empty leaves it out
	Logger         *slog.Logger          // the Listener's lines and OpenTelemetry's errors
	SpanExporter   sdktrace.SpanExporter // when set, gets every span as it ends, in place of OTEL_TRACES_EXPORTER's
	TrustedProxies []string              // addresses or CIDR prefixes whose X-Forwarded-For names the client
}

// Telemetry owns the tracer and meter providers and the instruments. Build
// it once with Setup and Shutdown it last; it is safe for concurrent use.
type Telemetry struct {
	tp       trace.TracerProvider // the SDK's, or a no-op one with traces off
	tracing  bool                 // tp is the SDK's
	mp       *sdkmetric.MeterProvider
	meter    metric.Meter
	metrics  http.Handler
	listener *Listener
	clientIP echo.IPExtractor
}

// Setup builds telemetry from cfg and the OTEL_* environment, and installs
// its tracer provider and the W3C tracecontext propagator (a caller's
// baggage is not passed on) as OpenTelemetry's globals. The span exporter
// is autoexport's (OTEL_TRACES_EXPORTER otlp, console or none), none when
// neither it nor an OTLP endpoint is set. service.name is "orderagg" unless
// OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME says otherwise. An unknown
// exporter or protocol, a malformed OTEL_RESOURCE_ATTRIBUTES or a bad
// trusted proxy is an error naming it.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	ip, err := clientIP(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{semconv.ServiceName("orderagg")}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(cfg.ServiceVersion))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(), resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	prom, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(prom))
	meter := mp.Meter("github.com/orderagg/orderagg/internal/telemetry")
	l, err := newListener(meter, cfg.Logger)
	var sp sdktrace.SpanProcessor
	if err == nil {
		sp, err = spanProcessor(ctx, cfg.SpanExporter)
	}
	if err != nil {
		return nil, errors.Join(err, mp.Shutdown(ctx))
	}
	t := &Telemetry{tp: noop.NewTracerProvider(), mp: mp, meter: meter, clientIP: ip, listener: l,
		// ContinueOnError: a failing collector costs its own series, not the scrape.
		metrics: promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true}),
	}
	if sp != nil {
		t.tp, t.tracing = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(sp)), true
	}
	otel.SetTracerProvider(t.tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	errLog := &rate.Sometimes{Interval: time.Second}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		errLog.Do(func() { cfg.Logger.Warn("telemetry error", "error", err.Error()) })
	}))
	return t, nil
}

// spanProcessor is a synchronous one over exp when set, else a batch one
// over the exporter autoexport picks; nil when traces are off.
func spanProcessor(ctx context.Context, exp sdktrace.SpanExporter) (sdktrace.SpanProcessor, error) {
	if exp != nil {
		return sdktrace.NewSimpleSpanProcessor(exp), nil
	}
	env := os.Getenv
	if env("OTEL_TRACES_EXPORTER") == "" && env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q (OTEL_EXPORTER_OTLP_PROTOCOL=%q, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=%q): %w",
			env("OTEL_TRACES_EXPORTER"), env("OTEL_EXPORTER_OTLP_PROTOCOL"), env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), err)
	}
	if autoexport.IsNoneSpanExporter(exp) {
		return nil, nil
	}
	return sdktrace.NewBatchSpanProcessor(exp), nil
}

// clientIP reads a request's client address: the peer's, or, when the
// peer is a trusted proxy, the nearest untrusted hop of X-Forwarded-For.
func clientIP(trusted []string) (echo.IPExtractor, error) {
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, s := range trusted {
		p, err := netip.ParsePrefix(s)
		if a, aerr := netip.ParseAddr(s); aerr == nil {
			p, err = a.Prefix(a.BitLen())
		}
		if err != nil {
			return nil, fmt.Errorf("telemetry: trusted proxy %q: want an IP address or CIDR prefix", s)
		}
		opts = append(opts, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(opts...), nil
}

// TracerProvider is the provider of every span: the SDK's when traces are
// on, a no-op one otherwise.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tp }

// MetricsHandler serves GET /metrics: the OpenTelemetry metrics in the
// Prometheus text format (OpenMetrics when asked), with the Go runtime and
// process collectors.
func (t *Telemetry) MetricsHandler() http.Handler { return t.metrics }

// Shutdown flushes the spans still queued and stops the providers, within
// ctx. Call it once, after the HTTP servers drained.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var err error
	if sdk, ok := t.tp.(*sdktrace.TracerProvider); ok {
		err = sdk.Shutdown(ctx)
	}
	return errors.Join(err, t.mp.Shutdown(ctx))
}

// Middleware starts each request's server span with otelhttp, continuing
// the caller's W3C trace (with traces off, it only extracts the caller's
// trace context into the request's, for the downstream calls), named "<method> <echo route>" (the method
// alone when unrouted); probes, /metrics and /dashboard are not traced.
// client.address is the peer's unless the peer is a trusted proxy. A
// handler's error goes to echo's HTTPErrorHandler here, so that the span
// records the status sent. Register it with e.Use.
func (t *Telemetry) Middleware() echo.MiddlewareFunc {
	if !t.tracing {
		return func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				r := c.Request()
				if ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header)); ctx != r.Context() {
					c.SetRequest(r.WithContext(ctx)) // the caller sent a trace or baggage
				}
				return next(c)
			}
		}
	}
	wrap := otelhttp.NewMiddleware("", otelhttp.WithTracerProvider(t.tp), otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()), otelhttp.WithFilter(traced),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			res := c.Response()
			w := res.Writer
			defer func() { res.Writer = w }()
			wrap(http.HandlerFunc(func(sw http.ResponseWriter, r *http.Request) {
				res.Writer = sw // the status reaches otelhttp's span
				c.SetRequest(r)
				span := trace.SpanFromContext(r.Context())
				if route := c.Path(); route != "" {
					span.SetName(r.Method + " " + route)
					span.SetAttributes(semconv.HTTPRoute(route))
				}
				span.SetAttributes(semconv.ClientAddress(t.clientIP(r)))
				if err := next(c); err != nil {
					span.RecordError(err)
					c.Error(err)
				}
				if id := res.Header().Get(echo.HeaderXRequestID); id != "" {
					span.SetAttributes(attribute.String("orderagg.request_id", id))
				}
			})).ServeHTTP(w, c.Request())
			return nil
		}
	}
}

// traced reports whether a request gets a server span: not probes, scrapes
// or the dashboard, whose event stream lasts as long as a browser tab.
func traced(r *http.Request) bool {
	p := r.URL.Path
	return p != "/healthz" && p != "/readyz" && p != "/metrics" && p != "/dashboard" && !strings.HasPrefix(p, "/dashboard/")
}

// WrapTransport fits downstream.Config.WrapTransport: with traces on,
// otelhttp's transport, making every attempt to dep a client span
// ("<dep> GET", orderagg.dependency set) and recording no metrics of its
// own; with traces off, next itself.
func (t *Telemetry) WrapTransport(dep string, next http.RoundTripper) http.RoundTripper {
	if !t.tracing {
		return next
	}
	return otelhttp.NewTransport(next, otelhttp.WithTracerProvider(t.tp), otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return dep + " " + r.Method }),
		otelhttp.WithSpanOptions(trace.WithAttributes(attrSpanDependency.String(dep))))
}

// InstrumentRedis adds redisotel to the last-good store's client: its pool
// metrics (db_client_connections_*, labelled pool_name, in redisotel's
// units) and, with traces on, a client span per command or pipeline,
// without its arguments (they hold whole cached answers) and without the
// commands that set a new connection up. Call it once, before the client is
// used.
func (t *Telemetry) InstrumentRedis(c redis.UniversalClient) error {
	err := redisotel.InstrumentMetrics(c, redisotel.WithMeterProvider(t.mp), redisotel.WithSemConvCompliantMetrics(true))
	if err == nil && t.tracing {
		err = redisotel.InstrumentTracing(c, redisotel.WithTracerProvider(t.tp), redisotel.WithDBStatement(false), redisotel.WithDialFilter(true),
			redisotel.WithCommandFilter(connSetup), redisotel.WithCommandsFilter(func(cmds []redis.Cmder) bool {
				return !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return !connSetup(c) })
			}))
	}
	if err != nil {
		return fmt.Errorf("telemetry: redis: %w", err)
	}
	return nil
}

// connSetup reports the commands go-redis sends to set a new connection up.
func connSetup(cmd redis.Cmder) bool {
	return slices.Contains([]string{"auth", "hello", "client", "select", "readonly"}, cmd.Name())
}

// LogHandler wraps h so that every record logged with a context holding a
// span carries trace_id and span_id.
func LogHandler(h slog.Handler) slog.Handler { return withTrace{h} }

type withTrace struct{ slog.Handler }

func (h withTrace) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone() // its attribute storage may be shared with another handler
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h withTrace) WithAttrs(a []slog.Attr) slog.Handler { return withTrace{h.Handler.WithAttrs(a)} }

func (h withTrace) WithGroup(g string) slog.Handler { return withTrace{h.Handler.WithGroup(g)} }
