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
//	agg := orderdetail.New(orderdetail.Config{…, Observer: tel.Observer()})
//	downstream.Config{WrapTransport: tel.WrapTransport}
//	tel.InstrumentRedis(store.Client())
//	tel.ObserveGuards(allGuards)         // the cache's guard included
//	tel.ObserveCache(func() telemetry.CacheStats { return telemetry.CacheStats(store.Stats()) })
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
// Setup reads the standard variables (contract §3): OTEL_TRACES_EXPORTER
// (otlp, console or none; default none unless OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set), OTEL_SERVICE_NAME (default
// orderagg) and OTEL_RESOURCE_ATTRIBUTES. OTLP goes over HTTP/protobuf; the
// exporter itself reads the other OTEL_EXPORTER_OTLP_* variables, and the
// SDK reads OTEL_TRACES_SAMPLER (default: follow the caller's sampling
// decision, sample new traces) and OTEL_BSP_*. A value Setup cannot honour
// is an error, so a typo stops the process at start-up instead of silently
// switching tracing off.
//
// # Why spans are made after the fact
//
// A guard reports an attempt to its Listener once the attempt is over, with
// its start and duration; the listener then records the span with those
// timestamps. That keeps the resilience package free of OpenTelemetry and
// costs nothing when traces are off, at one price: the HTTP client span of an
// attempt (from WrapTransport) is a sibling of the "dependency <dep>" span
// under the request's span, not its child. Both carry orderagg.dependency, and
// their times line up.
//
// # Cost
//
// With traces off the tracer provider is a no-op and the listener skips span
// work altogether; each event costs a counter add on a precomputed attribute
// set (no allocation on the common path). Gauges are read at scrape time from
// the guards' snapshots, so they cost nothing between scrapes.
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
