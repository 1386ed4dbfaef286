package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
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

// Environment variables read through Config.Getenv.
const (
	envTracesExporter   = "OTEL_TRACES_EXPORTER"
	envEndpoint         = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint   = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol         = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol   = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envServiceName      = "OTEL_SERVICE_NAME"
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
// environment (off unless an OTLP endpoint is set), logs go to slog.Default.
type Config struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME or
	// service.name in OTEL_RESOURCE_ATTRIBUTES says otherwise (the standard
	// precedence). Empty means DefaultServiceName.
	ServiceName string
	// ServiceVersion is service.version; empty leaves it out.
	ServiceVersion string
	// Stdout receives the console exporter's spans, one JSON object per span.
	// Default os.Stdout.
	Stdout io.Writer
	// Getenv reads the OTEL_* variables that choose the exporter and the
	// resource. Default os.Getenv. The OTLP exporter and the SDK's own
	// settings (OTEL_EXPORTER_OTLP_HEADERS, OTEL_TRACES_SAMPLER,
	// OTEL_BSP_*, …) are read by the OpenTelemetry SDK from the process
	// environment, whatever Getenv is.
	Getenv func(string) string
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
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Getenv == nil {
		c.Getenv = os.Getenv
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
	// propFields are the headers prop reads, listed once: the composite
	// propagator builds a new map and slice on every Fields call.
	propFields []string
	mp         *sdkmetric.MeterProvider
	meter      metric.Meter
	registry   *prometheus.Registry
	handler    http.Handler

	inst instruments
	deps cowMap[*depAttrs]

	shutdownOnce sync.Once
	shutdownErr  error
}

// Setup builds telemetry from cfg and the standard OTEL_* environment
// (contract §3) and installs the W3C tracecontext and baggage propagator and
// the tracer provider as OpenTelemetry's globals, so that libraries which use
// the globals join the same traces.
//
// OTEL_TRACES_EXPORTER is otlp (OTLP over HTTP/protobuf), console (JSON to
// Config.Stdout) or none; when unset it is otlp if OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, else none. With traces off the
// tracer provider is a no-op and the per-event span work is skipped, so the
// cost is a few atomic loads. An unknown exporter, an OTLP protocol other than
// http/protobuf or a malformed OTEL_RESOURCE_ATTRIBUTES is an error naming the
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
	t.propFields = t.prop.Fields()
	t.deps.build = newDepAttrs

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
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(promExp))
	t.meter = t.mp.Meter(scopeName)
	if err := t.inst.init(t.meter); err != nil {
		return nil, errors.Join(err, t.mp.Shutdown(ctx))
	}
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
		name, exp, err := newSpanExporter(ctx, cfg)
		if err != nil {
			return nil, errors.Join(err, t.mp.Shutdown(ctx))
		}
		t.exporter = name
		if exp != nil {
			var opts []sdktrace.BatchSpanProcessorOption
			if name == ExporterConsole && cfg.Getenv(envBSPScheduleDelay) == "" {
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

// newSpanExporter picks the exporter named by OTEL_TRACES_EXPORTER; a nil
// exporter means traces are off.
func newSpanExporter(ctx context.Context, cfg Config) (string, sdktrace.SpanExporter, error) {
	name := strings.ToLower(strings.TrimSpace(cfg.Getenv(envTracesExporter)))
	if name == "" {
		name = ExporterNone
		if cfg.Getenv(envEndpoint) != "" || cfg.Getenv(envTracesEndpoint) != "" {
			name = ExporterOTLP
		}
	}
	switch name {
	case ExporterNone:
		return name, nil, nil
	case ExporterConsole:
		exp, err := stdouttrace.New(stdouttrace.WithWriter(cfg.Stdout))
		if err != nil {
			return "", nil, fmt.Errorf("telemetry: console exporter: %w", err)
		}
		return name, exp, nil
	case ExporterOTLP:
		proto, key := cfg.Getenv(envTracesProtocol), envTracesProtocol
		if proto == "" {
			proto, key = cfg.Getenv(envProtocol), envProtocol
		}
		if proto != "" && proto != "http/protobuf" {
			return "", nil, fmt.Errorf("telemetry: %s=%q: only http/protobuf is supported", key, proto)
		}
		// The exporter reads the endpoint, headers, TLS, timeout and
		// compression from OTEL_EXPORTER_OTLP_* itself. It connects lazily:
		// an unreachable collector costs dropped spans, never start-up.
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return "", nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
		}
		return name, exp, nil
	}
	return "", nil, fmt.Errorf("telemetry: %s=%q: want %s, %s or %s", envTracesExporter, name, ExporterOTLP, ExporterConsole, ExporterNone)
}

// newResource describes this process. Precedence, lowest first:
// Config.ServiceName, OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME — the
// standard order, read through Config.Getenv so tests need not touch the
// process environment.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{semconv.ServiceName(cfg.ServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(cfg.ServiceVersion))
	}
	env, err := parseResourceAttributes(cfg.Getenv(envResourceAttrs))
	if err != nil {
		return nil, err
	}
	attrs = append(attrs, env...)
	if name := strings.TrimSpace(cfg.Getenv(envServiceName)); name != "" {
		attrs = append(attrs, semconv.ServiceName(name))
	}
	// resource.New keeps the last value of a repeated key, which is what
	// gives the order above its meaning.
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithAttributes(attrs...),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// parseResourceAttributes reads OTEL_RESOURCE_ATTRIBUTES: comma-separated
// key=value pairs with percent-encoded values. Unlike the SDK, which keeps
// what it can and logs the rest, a malformed pair is an error: a typo in a
// deployment should stop it, not silently drop a label.
func parseResourceAttributes(s string) ([]attribute.KeyValue, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var attrs []attribute.KeyValue
	for pair := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("telemetry: %s: %q is not key=value", envResourceAttrs, pair)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("telemetry: %s: %s: %w", envResourceAttrs, k, err)
		}
		attrs = append(attrs, attribute.String(k, val))
	}
	return attrs, nil
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
