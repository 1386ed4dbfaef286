// Package telemetry is orderagg's OpenTelemetry wiring: traces, metrics in the
// Prometheus format, and the log lines that go with them. Other packages do
// not import OpenTelemetry; they expose small hooks (resilience.Listener,
// orderdetail.Observer, downstream.Config.WrapTransport) and this package
// fills them. The metric names, units and attributes, and how to read them
// during an incident, are in docs/runbook.md; a test scrapes /metrics and
// fails when the two disagree.
//
// # Wiring
//
//	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceVersion: version, Logger: logger})
//	if err != nil { … exit 2 … }        // unknown OTEL_TRACES_EXPORTER and the like
//	defer tel.Shutdown(shutdownCtx)      // after the HTTP server drained: flushes spans
//
//	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(os.Stderr, nil)))
//	lis := tel.Listener(logger)          // resilience.WithListener(lis) on every guard
//	store, _ := cache.Open(ctx, cfg, logger, cache.WithListener(tel.CacheListener()))
//	tel.InstrumentRedis(store.Client())
//	agg := orderdetail.New(orderdetail.Config{…, Observer: tel.Observer()})
//	downstream.Config{WrapTransport: tel.WrapTransport}
//	tel.Observe(telemetry.State{Guards: guards, …}) // gauges; every guard's counters start at 0
//	e.Use(tel.Middleware())              // first
//	e.GET("/metrics", echo.WrapHandler(tel.MetricsHandler()))
//	// in the order-detail handler, once the answer is written:
//	tel.RecordRequest(ctx, status, degraded, time.Since(arrival))
//
// Log to standard error when the console span exporter is on: it writes spans
// to standard output, and the two streams are easier to read apart.
//
// # Configuration
//
// Setup reads the standard variables (contract §3) from the process
// environment through the OpenTelemetry libraries themselves: contrib's
// autoexport picks the span exporter from OTEL_TRACES_EXPORTER (otlp, console
// or none) and OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf or grpc), and
// resource.WithFromEnv reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME.
// Setup adds only the contract's default — none unless
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
// where autoexport would default to otlp — and service.name orderagg. The
// exporter reads the other OTEL_EXPORTER_OTLP_* variables, and the SDK
// OTEL_TRACES_SAMPLER (default: follow the caller's sampling decision, sample
// new traces) and OTEL_BSP_*. A value Setup cannot honour is an error, so a
// typo stops the process at start-up instead of silently switching tracing
// off.
//
// # The shape of a request's trace
//
//	GET /v1/orders/{id}                      server span
//	├── dependency inventory                 one per guarded call: its last event
//	│   ├── attempt inventory                one per attempt: event, attempt, hedge, probe
//	│   │   └── inventory GET                HTTP client span (otelhttp)
//	│   └── attempt inventory                a retry
//	│       └── inventory GET
//	└── fallback inventory                   after the call failed
//	    └── dependency cache                 the last-good read's guarded call
//	        └── attempt cache
//	            └── hmget                    Redis client span (redisotel)
//	cache write                              a root of its own, linked to each
//	└── redis.pipeline evalsha               request whose answer it stores
//
// The link needs the request's context at the store: cache.Store.PutContext
// keeps it with the queued entry; an entry handed over with Put has none.
//
// A guard reports an attempt to its Listener only once the attempt is over,
// which keeps the resilience package free of OpenTelemetry; but an attempt's
// HTTP or Redis span is made while it runs and needs its parent then. So the
// middleware gives each traced request a small table (nest.go): the first
// to see a call — the transport of WrapTransport, the Redis hook of
// InstrumentRedis, or the listener for a call that was refused — starts its
// span there, the listener ends each span with its outcome, and the
// middleware ends whatever is left when the request ends. Outside a traced
// request the listener records its spans after the fact, with the event's
// start and duration, under the span in the event's context. The cache
// guard's events do not say whose fallback they serve: a read that ran is
// placed by the Redis hook (cache.ReadFor names the dependency), and a read
// the guard refused waits for the lookup that follows on the same fallback
// context (Observer.CacheLookup names it).
//
// # Cost
//
// Counters and histograms are OpenTelemetry's synchronous instruments,
// recorded where each event happens. Gauges are read at scrape time from
// the guards' snapshots, so they cost nothing between scrapes. With traces
// off the tracer provider is a no-op and the listener skips span work.
//
// # Logs
//
// The listener logs each fallback at WARN, at most one line per dependency
// per second (Config.LogInterval), with the number suppressed since the last
// line and the latest failed event of that dependency as the cause: during an
// outage of a dependency serving thousands of requests a second, the log
// grows by one line a second, not thousands. Breaker transitions are logged
// every time (WARN when opening or forced, INFO when closing or probing):
// the sleep window already bounds their rate.
//
// Everything here is safe for concurrent use.
package telemetry
