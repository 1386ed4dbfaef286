package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// scopeName is the instrumentation scope of everything this package records.
const scopeName = "github.com/orderagg/orderagg/internal/telemetry"

// Exporter names of OTEL_TRACES_EXPORTER.
const (
	ExporterOTLP    = "otlp"
	ExporterConsole = "console"
	ExporterNone    = "none"
)

// Config sets up telemetry. The zero value is valid: traces follow the
// process environment (off unless an OTLP endpoint is set), logs go to
// slog.Default, X-Forwarded-For is ignored and no baggage is forwarded.
type Config struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME or
	// OTEL_RESOURCE_ATTRIBUTES say otherwise; empty means "orderagg".
	ServiceName string
	// ServiceVersion is service.version; empty leaves it out.
	ServiceVersion string
	// Logger receives the fallback and breaker lines and OpenTelemetry's
	// own errors. Default slog.Default().
	Logger *slog.Logger
	// LogInterval is the least time between two fallback lines of one
	// dependency, and between two telemetry error lines. Default 1s.
	LogInterval time.Duration
	// Now is the clock of those limits. Default time.Now.
	Now func() time.Time
	// SpanExporter, when set, receives every span as it ends, in place of
	// the exporter OTEL_TRACES_EXPORTER names; Shutdown shuts it down.
	SpanExporter sdktrace.SpanExporter
	// TrustedProxies are the addresses or CIDR prefixes (--trusted-proxies)
	// whose X-Forwarded-For gives a request's client.address; any other
	// peer is the client itself.
	TrustedProxies []string
	// ForwardBaggage are the baggage keys (--forward-baggage) taken from a
	// caller's baggage header and passed on to the downstreams; the rest is
	// dropped. The W3C traceparent always passes.
	ForwardBaggage []string
}

// Telemetry owns the tracer and meter providers and the instruments. Build
// it once with Setup and Shutdown it last; it is safe for concurrent use.
type Telemetry struct {
	cfg      Config
	exporter string // OTEL_TRACES_EXPORTER's choice, or "test"
	tp       trace.TracerProvider
	sdkTP    *sdktrace.TracerProvider // nil when traces are off
	tracer   trace.Tracer
	tracing  bool // spans are recorded
	mp       *sdkmetric.MeterProvider
	meter    metric.Meter
	handler  http.Handler
	inst     instruments
	clientIP echo.IPExtractor

	once        sync.Once
	shutdownErr error
}

// Setup builds telemetry from cfg and the standard OTEL_* environment
// (contract §3) and installs its tracer provider and the W3C tracecontext
// and baggage propagator as OpenTelemetry's globals. autoexport picks the
// span exporter from OTEL_TRACES_EXPORTER (otlp, console, none) and
// OTEL_EXPORTER_OTLP_PROTOCOL; unset, it is otlp when an OTLP endpoint is
// set and none otherwise. An unknown exporter or protocol, a malformed
// OTEL_RESOURCE_ATTRIBUTES or a bad trusted proxy is an error naming it, so
// that a typo stops the process rather than switching tracing off.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	if cfg.ServiceName == "" {
		cfg.ServiceName = "orderagg"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LogInterval <= 0 {
		cfg.LogInterval = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t := &Telemetry{cfg: cfg}
	var err error
	if t.clientIP, err = clientIP(cfg.TrustedProxies); err != nil {
		return nil, err
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	promExp, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(promExp), sdkmetric.WithView(redisotelViews...))
	t.meter = t.mp.Meter(scopeName)
	if t.inst, err = newInstruments(t.meter); err != nil {
		return nil, errors.Join(err, t.mp.Shutdown(ctx))
	}
	t.inst.zeroProcess()
	// ContinueOnError: a failing collector costs its own series, not the
	// scrape. OpenMetrics: a scraper that asks for it gets exemplars.
	t.handler = promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true})

	sp, err := t.spanProcessor(ctx)
	if err != nil {
		return nil, errors.Join(err, t.mp.Shutdown(ctx))
	}
	t.tp = noop.NewTracerProvider()
	if sp != nil {
		t.sdkTP = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(sp))
		t.tp, t.tracing = t.sdkTP, true
	}
	t.tracer = t.tp.Tracer(scopeName)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetTracerProvider(t.tp)
	lim := newLimiter(cfg.Now, cfg.LogInterval)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		if ok, suppressed := lim.allow(); ok {
			cfg.Logger.Warn("telemetry error", "error", err.Error(), "suppressed", suppressed)
		}
	}))
	return t, nil
}

// spanProcessor is Config.SpanExporter's, synchronous, or a batch one over
// the exporter autoexport picks; nil when traces are off.
func (t *Telemetry) spanProcessor(ctx context.Context) (sdktrace.SpanProcessor, error) {
	if t.cfg.SpanExporter != nil {
		t.exporter = "test"
		return sdktrace.NewSimpleSpanProcessor(t.cfg.SpanExporter), nil
	}
	t.exporter = os.Getenv("OTEL_TRACES_EXPORTER")
	exp, err := autoexport.NewSpanExporter(ctx, autoexport.WithFallbackSpanExporter(
		func(ctx context.Context) (sdktrace.SpanExporter, error) {
			if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
				return nil, nil // the contract's default: none without an endpoint
			}
			t.exporter = ExporterOTLP
			return autoexport.NewSpanExporter(ctx)
		}))
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q (OTEL_EXPORTER_OTLP_PROTOCOL=%q, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=%q): %w",
			t.exporter, os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), err)
	}
	if exp == nil || autoexport.IsNoneSpanExporter(exp) {
		t.exporter = ExporterNone
		return nil, nil
	}
	var opts []sdktrace.BatchSpanProcessorOption
	if t.exporter == ExporterConsole && os.Getenv("OTEL_BSP_SCHEDULE_DELAY") == "" {
		// Someone reading standard output wants the request they just made.
		opts = append(opts, sdktrace.WithBatchTimeout(time.Second))
	}
	return sdktrace.NewBatchSpanProcessor(exp, opts...), nil
}

// newResource describes this process. Precedence, lowest first:
// Config.ServiceName, OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	// The environment on its own first: the SDK keeps what it can of a
	// malformed value, but a typo in a deployment should stop it.
	fromEnv, err := resource.New(ctx, resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(cfg.ServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(cfg.ServiceVersion))
	}
	base, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(), resource.WithAttributes(attrs...))
	if err == nil {
		base, err = resource.Merge(base, fromEnv)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return base, nil
}

// clientIP reads a request's client address: the peer's, or, when the
// peer is a trusted proxy, the nearest untrusted hop of X-Forwarded-For.
func clientIP(trusted []string) (echo.IPExtractor, error) {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect(), nil
	}
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
// on, a no-op one otherwise. Give it to resilience.WithTracerProvider.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tp }

// MetricsHandler serves GET /metrics: the OpenTelemetry metrics in the
// Prometheus text format (OpenMetrics when asked), plus the Go runtime and
// process collectors, from a registry of its own.
func (t *Telemetry) MetricsHandler() http.Handler { return t.handler }

// Shutdown flushes the spans still queued and stops the providers, within
// ctx. Call it after the HTTP servers drained; later calls return the
// first one's result.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.once.Do(func() {
		if t.sdkTP != nil {
			t.shutdownErr = t.sdkTP.Shutdown(ctx)
		}
		t.shutdownErr = errors.Join(t.shutdownErr, t.mp.Shutdown(ctx))
	})
	return t.shutdownErr
}
