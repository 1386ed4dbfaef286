// Package telemetry is orderagg's OpenTelemetry wiring: traces, metrics in
// the Prometheus format, and the log lines that go with them. The other
// packages expose small hooks (resilience.Listener, orderdetail.Observer,
// cache.Listener, downstream.Config.WrapTransport) and this package fills
// them; docs/runbook.md names every metric, and a test holds the two in step.
//
//	tel, err := telemetry.Setup(ctx, telemetry.Config{…})   // OTEL_* read here
//	defer tel.Shutdown(ctx)                                  // after the servers drained
//	resilience.New(name, cfg, resilience.WithListener(tel.Listener(logger)),
//		resilience.WithTracerProvider(tel.TracerProvider())) // a span per call
//	cache.Open(ctx, cfg, logger, cache.WithListener(tel.CacheListener()))
//	tel.InstrumentRedis(store.Client())                      // redisotel
//	orderdetail.Config{Observer: tel.Observer()}
//	downstream.Config{WrapTransport: tel.WrapTransport}      // otelhttp
//	e.Use(tel.Middleware())                                  // the server span
//	handlers.Options{Metrics: tel.MetricsHandler(), Record: tel.RecordRequest, Rejected: tel.RecordRejected}
//	tel.Observe(telemetry.State{…})                          // gauges; counters start at 0
//
// A request's trace: the server span "GET /v1/orders/{id}" (otelhttp, named
// after routing), under it each guard's "dependency <dep>" span (an
// "attempt" event per attempt) holding its HTTP client span "<dep> GET",
// and "fallback <dep>" holding the cache guard's call and its Redis span. A
// batch of last-good writes is a "cache write" trace of its own, linked to
// each request whose answer it stores.
//
// Counters and histograms are synchronous instruments, recorded where each
// event happens; gauges are read at scrape time. With traces off the
// tracer provider is a no-op, and a caller's traceparent still reaches the
// downstreams.
package telemetry
