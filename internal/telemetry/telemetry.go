package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/textproto"
	"os"
	"sync"
	"time"

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

// DefaultServiceName is service.name when neither Config.ServiceName nor the
// environment names the service.
const DefaultServiceName = "orderagg"

// Environment variables Setup looks at itself; the exporters and the SDK
// read the rest of OTEL_* on their own.
const (
	envTracesExporter   = "OTEL_TRACES_EXPORTER"
	envEndpoint         = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint   = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol         = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol   = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envResourceAttrs    = "OTEL_RESOURCE_ATTRIBUTES"
	envBSPScheduleDelay = "OTEL_BSP_SCHEDULE_DELAY"
)

// Exporter names accepted in OTEL_TRACES_EXPORTER.
const (
	ExporterOTLP    = "otlp"
	ExporterConsole = "console"
	ExporterNone    = "none"
)

// consoleBatchDelay is how soon the console exporter shows a finished span.
// The SDK's 5s default suits a collector, but someone reading standard output
// wants to see the request they just made; batching is kept so that a slow or
// blocked stdout never stalls a request.
const consoleBatchDelay = time.Second

// Config sets up telemetry. The zero value is valid: traces follow the
// process environment (off unless an OTLP endpoint is set), logs go to
// slog.Default.
type Config struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME or
	// service.name in OTEL_RESOURCE_ATTRIBUTES says otherwise (the standard
	// precedence). Empty means DefaultServiceName.
	ServiceName string
	// ServiceVersion is service.version; empty leaves it out.
	ServiceVersion string
	// Logger receives OpenTelemetry's own errors (an unreachable collector,
	// for example), at most one line per LogInterval. Default slog.Default().
	Logger *slog.Logger
	// LogInterval is the least time between two fallback lines of one
	// dependency, and between two telemetry error lines. Default 1s.
	LogInterval time.Duration
	// Now is the clock of the log rate limiter. Default time.Now; tests
	// inject one so they need no sleeps.
	Now func() time.Time
	// SpanExporter, when set, receives every span synchronously as it ends,
	// and OTEL_TRACES_EXPORTER is ignored. It exists for tests (for example
	// tracetest.NewInMemoryExporter) and is shut down by Shutdown.
	SpanExporter sdktrace.SpanExporter
}

func (c Config) withDefaults() Config {
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LogInterval <= 0 {
		c.LogInterval = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Telemetry owns the tracer and meter providers and the instruments. Build it
// once with Setup, share it, and Shutdown it last. It is safe for concurrent
// use.
type Telemetry struct {
	cfg      Config
	exporter string // the chosen OTEL_TRACES_EXPORTER value, or "test"

	tp      trace.TracerProvider
	sdkTP   *sdktrace.TracerProvider // nil when traces are off
	tracer  trace.Tracer
	tracing bool // spans are recorded somewhere; when false, skip building them

	prop propagation.TextMapPropagator
	// propFields are the headers prop reads, listed once and canonical: the
	// composite propagator builds a new map and slice on every Fields call,
	// and Header.Get allocates to canonicalise "traceparent".
	propFields []string
	mp         *sdkmetric.MeterProvider
	meter      metric.Meter
	registry   *prometheus.Registry
	handler    http.Handler

	inst instruments

	shutdownOnce sync.Once
	shutdownErr  error
}

// Setup builds telemetry from cfg and the standard OTEL_* environment
// (contract §3) and installs the W3C tracecontext and baggage propagator and
// the tracer provider as OpenTelemetry's globals, so that libraries which use
// the globals join the same traces.
//
// The exporter comes from contrib's autoexport: OTEL_TRACES_EXPORTER is otlp
// (OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf, the default, or grpc), console
// (one JSON object per finished span on standard output) or none. Unset, it
// is otlp when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// is set and none otherwise (autoexport alone would default to otlp, which
// the contract does not want). The resource comes from
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME over Config's defaults.
// With traces off the tracer provider is a no-op and the per-event span work
// is skipped, so the cost is a few atomic loads. An unknown exporter or
// protocol or a malformed OTEL_RESOURCE_ATTRIBUTES is an error naming the
// variable: the process should refuse to start rather than run blind.
//
// Metrics are always on and served by MetricsHandler. Call Shutdown to flush.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	cfg = cfg.withDefaults()
	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	t := &Telemetry{
		cfg:  cfg,
		prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	for _, f := range t.prop.Fields() {
		t.propFields = append(t.propFields, textproto.CanonicalMIMEHeaderKey(f))
	}

	// Metrics first: nothing in them can fail for reasons of configuration,
	// and building them before the span exporter means an error below has
	// only the tracer provider to undo.
	t.registry = prometheus.NewRegistry()
	t.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	promExp, err := otelprom.New(
		otelprom.WithRegisterer(t.registry),
		// Scope labels would be the same on every orderagg_ series; they
		// only lengthen queries.
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(promExp),
		sdkmetric.WithView(secondsViews...))
	t.meter = t.mp.Meter(scopeName)
	if t.inst, err = newInstruments(t.meter); err != nil {
		return nil, errors.Join(err, t.mp.Shutdown(ctx))
	}
	t.inst.zeroProcess()
	t.handler = promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{
		// A failing collector should cost its own series, not the scrape.
		ErrorHandling: promhttp.ContinueOnError,
		// Lets a Prometheus that asks for OpenMetrics get exemplars, which
		// link a latency bucket to a trace id.
		EnableOpenMetrics: true,
	})

	var sp sdktrace.SpanProcessor
	switch {
	case cfg.SpanExporter != nil:
		t.exporter = "test"
		sp = sdktrace.NewSimpleSpanProcessor(cfg.SpanExporter)
	default:
		name, exp, err := newSpanExporter(ctx)
		if err != nil {
			return nil, errors.Join(err, t.mp.Shutdown(ctx))
		}
		t.exporter = name
		if exp != nil {
			var opts []sdktrace.BatchSpanProcessorOption
			if name == ExporterConsole && os.Getenv(envBSPScheduleDelay) == "" {
				opts = append(opts, sdktrace.WithBatchTimeout(consoleBatchDelay))
			}
			sp = sdktrace.NewBatchSpanProcessor(exp, opts...)
		}
	}
	if sp != nil {
		t.sdkTP = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(sp))
		t.tp, t.tracing = t.sdkTP, true
	} else {
		t.tp = noop.NewTracerProvider()
	}
	t.tracer = t.tp.Tracer(scopeName)

	otel.SetTextMapPropagator(t.prop)
	otel.SetTracerProvider(t.tp)
	otel.SetErrorHandler(newErrorLogger(cfg))
	return t, nil
}

// newSpanExporter lets autoexport pick the exporter named by
// OTEL_TRACES_EXPORTER; a nil exporter means traces are off.
func newSpanExporter(ctx context.Context) (string, sdktrace.SpanExporter, error) {
	name := os.Getenv(envTracesExporter)
	exp, err := autoexport.NewSpanExporter(ctx, autoexport.WithFallbackSpanExporter(
		func(ctx context.Context) (sdktrace.SpanExporter, error) {
			// Unset: the contract's default is none unless an endpoint
			// says where spans should go.
			if os.Getenv(envEndpoint) == "" && os.Getenv(envTracesEndpoint) == "" {
				name = ExporterNone
				return nil, nil
			}
			name = ExporterOTLP
			return autoexport.NewSpanExporter(ctx) // unset means otlp to autoexport
		}))
	if err != nil {
		return "", nil, fmt.Errorf("telemetry: %s=%q (%s=%q, %s=%q): %w", envTracesExporter, name,
			envProtocol, os.Getenv(envProtocol), envTracesProtocol, os.Getenv(envTracesProtocol), err)
	}
	if exp == nil || autoexport.IsNoneSpanExporter(exp) {
		return ExporterNone, nil, nil
	}
	return name, exp, nil
}

// newResource describes this process. Precedence, lowest first:
// Config.ServiceName, OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME — the
// standard order, which resource.WithFromEnv implements.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	// The environment on its own first: the SDK keeps what it can of a
	// malformed value and reports the rest, but a typo in a deployment
	// should stop it, not silently drop a label.
	fromEnv, err := resource.New(ctx, resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", envResourceAttrs, err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(cfg.ServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(cfg.ServiceVersion))
	}
	base, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithAttributes(attrs...),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	res, err := resource.Merge(base, fromEnv) // the second wins
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// Exporter reports the trace exporter in use: otlp, console, none, or test
// when Config.SpanExporter was given. main logs it at start-up.
func (t *Telemetry) Exporter() string { return t.exporter }

// TracerProvider is the provider spans are made with: the SDK's when traces
// are on, a no-op one otherwise.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tp }

// Propagator is the W3C tracecontext and baggage propagator Setup installed.
func (t *Telemetry) Propagator() propagation.TextMapPropagator { return t.prop }

// MetricsHandler serves GET /metrics: the OpenTelemetry metrics in the
// Prometheus text format (OpenMetrics when the scraper asks for it), plus the
// Go runtime (go_goroutines, go_memstats_*) and process (process_*)
// collectors. It uses its own registry, so nothing registered globally by a
// library leaks in.
func (t *Telemetry) MetricsHandler() http.Handler { return t.handler }

// Shutdown flushes spans still queued to their exporter and stops the
// providers. It is bounded by ctx, safe to call more than once (later calls
// return the first result), and should run after the HTTP server has
// drained, so the last requests' spans are not lost. Metrics are pulled by
// Prometheus, so nothing of theirs is pending.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.shutdownOnce.Do(func() {
		var errs []error
		if t.sdkTP != nil {
			if err := t.sdkTP.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("telemetry: traces: %w", err))
			}
		}
		if err := t.mp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("telemetry: metrics: %w", err))
		}
		t.shutdownErr = errors.Join(errs...)
	})
	return t.shutdownErr
}

// errorLogger routes OpenTelemetry's internal errors (export failures, for
// the most part) to the structured log, at most one line per interval: a
// collector that is down for an hour should cost a few hundred lines, not
// one per batch.
type errorLogger struct {
	log *slog.Logger
	lim *limiter
}

func newErrorLogger(cfg Config) otel.ErrorHandler {
	return &errorLogger{log: cfg.Logger, lim: newLimiter(cfg.Now, cfg.LogInterval)}
}

func (e *errorLogger) Handle(err error) {
	ok, suppressed := e.lim.allow()
	if !ok {
		return
	}
	e.log.LogAttrs(context.Background(), slog.LevelWarn, "telemetry error",
		slog.String("error", err.Error()), slog.Int64("suppressed", suppressed))
}
