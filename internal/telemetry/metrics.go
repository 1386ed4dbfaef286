package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/orderagg/orderagg/internal/cache"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Attribute keys of the metrics.
const (
	attrDependency = "dependency"
	attrEvent      = "event"
	attrReason     = "reason"
	attrOutcome    = "outcome"
)

// Event names of orderagg_dependency_events_total beyond resilience's own
// (success … fallback_failure): the last-good lookups the page reports.
const (
	EventCacheHit  = "cache_hit"
	EventCacheMiss = "cache_miss"
)

// latencyBuckets (seconds): fine steps where downstreams normally answer,
// and a boundary near every budget an operator is likely to set, up to the
// deadline and beyond it.
var latencyBuckets = []float64{
	0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15,
	0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 1.5, 2,
}

// instruments are the synchronous instruments, recorded where each event
// happens. The Prometheus exporter appends _total to counters and _seconds
// to instruments in seconds; docs/runbook.md lists the names as scraped.
type instruments struct {
	events, calls, retries, hedges metric.Int64Counter
	transitions, timeoutChanges    metric.Int64Counter
	requests, rejected             metric.Int64Counter
	cacheReads, cacheWrites        metric.Int64Counter
	attempt, requestDuration       metric.Float64Histogram
}

func newInstruments(m metric.Meter) (instruments, error) {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(latencyBuckets...))
		errs = append(errs, err)
		return h
	}
	in := instruments{
		events: counter("orderagg_dependency_events", "{event}",
			"Guarded dependency events, one series per event kind: success, failure, timeout, short_circuited, rejected, bad_request, deadline, fallback_success, fallback_failure, cache_hit, cache_miss (with reason)."),
		calls: counter("orderagg_dependency_calls", "{call}",
			"Logical guarded calls, whether or not they reached the dependency; retries and hedges are not extra calls."),
		retries:         counter("orderagg_dependency_retries", "{attempt}", "Retry attempts (second and later attempts of a call, hedges excluded)."),
		hedges:          counter("orderagg_dependency_hedges", "{attempt}", "Hedged (backup) attempts started."),
		transitions:     counter("orderagg_breaker_transitions", "{transition}", "Circuit breaker state changes, operator overrides included."),
		timeoutChanges:  counter("orderagg_dependency_timeout_changes", "{change}", "Moves of an adaptive sub-budget (timeout: auto), by direction: up or down."),
		requests:        counter("orderagg_http_requests", "{request}", "Order-detail answers by HTTP status and degraded flag."),
		rejected:        counter("orderagg_admission_rejected", "{request}", "Order-detail requests refused at admission (503 OVERLOADED), before any work."),
		cacheReads:      counter("orderagg_cache_reads", "{read}", "Last-good store reads by outcome: hit, miss, corrupt, error."),
		cacheWrites:     counter("orderagg_cache_writes", "{write}", "Last-good store writes by outcome: ok, stale (a newer answer was stored), dropped (queue full), error."),
		attempt:         histogram("orderagg_dependency_attempt_duration", "Duration of each physical attempt, by dependency and outcome."),
		requestDuration: histogram("orderagg_http_request_duration", "Order-detail request duration, arrival to answer, by HTTP status and degraded flag."),
	}
	return in, errors.Join(errs...)
}

func with(kvs ...attribute.KeyValue) metric.MeasurementOption { return metric.WithAttributes(kvs...) }

func dependency(dep string) attribute.KeyValue { return attribute.String(attrDependency, dep) }

func requestAttrs(status int, degraded bool) metric.MeasurementOption {
	return with(attribute.String("status", strconv.Itoa(status)), attribute.Bool("degraded", degraded))
}

// RecordRequest counts one order-detail answer by HTTP status and degraded
// flag and records its duration, arrival to answer. Call it once per
// GET /v1/orders/{id}, whatever the status, with the request's context: the
// server span gets orderagg.degraded, and the latency histogram can carry the
// trace as an exemplar.
func (t *Telemetry) RecordRequest(ctx context.Context, status int, degraded bool, d time.Duration) {
	attrs := requestAttrs(status, degraded)
	t.inst.requests.Add(ctx, 1, attrs)
	t.inst.requestDuration.Record(ctx, d.Seconds(), attrs)
	trace.SpanFromContext(ctx).SetAttributes(attrSpanDegraded.Bool(degraded))
}

// RecordRejected counts one order-detail request refused at admission. It
// is also in orderagg_http_requests_total as a 503, beside the 503s of an
// unavailable order; this counter tells the two apart.
func (t *Telemetry) RecordRejected(ctx context.Context) { t.inst.rejected.Add(ctx, 1) }

// CacheListener counts the last-good store's reads and writes by outcome in
// orderagg_cache_reads_total and orderagg_cache_writes_total; give it to
// cache.WithListener.
func (t *Telemetry) CacheListener() cache.Listener {
	return func(ev cache.Event, _ string) {
		c, outcome := cacheCounter(&t.inst, ev)
		if c != nil {
			c.Add(context.Background(), 1, with(attribute.String(attrOutcome, outcome)))
		}
	}
}

func cacheCounter(in *instruments, ev cache.Event) (metric.Int64Counter, string) {
	switch ev {
	case cache.EventHit:
		return in.cacheReads, "hit"
	case cache.EventMiss:
		return in.cacheReads, "miss"
	case cache.EventCorrupt:
		return in.cacheReads, "corrupt"
	case cache.EventReadError:
		return in.cacheReads, "error"
	case cache.EventWriteOK:
		return in.cacheWrites, "ok"
	case cache.EventWriteStale:
		return in.cacheWrites, "stale"
	case cache.EventWriteDropped:
		return in.cacheWrites, "dropped"
	case cache.EventWriteError:
		return in.cacheWrites, "error"
	}
	return nil, ""
}

// Label values known at start-up, each exported at 0 from then on: rate()
// and increase() see the first failure or 503 as a rise from 0, and a ratio
// over them reads 0 rather than "no data" right after a deploy.
var (
	// pageAnswers are the status × degraded pairs the order-detail handler
	// writes: a page (whole or degraded), a bad id, an unknown order, an
	// encoding failure, an unavailable order or a refusal at admission.
	pageAnswers = []struct {
		status   int
		degraded bool
	}{{200, false}, {200, true}, {400, false}, {404, false}, {500, false}, {503, false}}
	knownEvents = []string{
		"success", "failure", "timeout", "short_circuited", "rejected", "bad_request", "deadline",
		"fallback_success", "fallback_failure", EventCacheHit,
	}
	// knownMissReasons are the reasons orderdetail.Observer reports a miss for.
	knownMissReasons = []string{"absent", "stale", "corrupt", "error"}
	breakerStates    = []resilience.State{resilience.StateClosed, resilience.StateOpen, resilience.StateHalfOpen, resilience.StateForcedOpen, resilience.StateForcedClosed}
)

// zeroProcess starts the series of the process at 0.
func (in *instruments) zeroProcess() {
	ctx := context.Background()
	for _, a := range pageAnswers {
		in.requests.Add(ctx, 0, requestAttrs(a.status, a.degraded))
	}
	in.rejected.Add(ctx, 0)
	for ev := range cache.EventWriteError + 1 {
		if c, outcome := cacheCounter(in, ev); c != nil {
			c.Add(ctx, 0, with(attribute.String(attrOutcome, outcome)))
		}
	}
}

// zeroDependency starts the series of dep at 0.
func (in *instruments) zeroDependency(dep string) {
	ctx := context.Background()
	d := dependency(dep)
	for _, c := range []metric.Int64Counter{in.calls, in.retries, in.hedges} {
		c.Add(ctx, 0, with(d))
	}
	for _, ev := range knownEvents {
		in.events.Add(ctx, 0, with(d, attribute.String(attrEvent, ev)))
	}
	for _, r := range knownMissReasons {
		in.events.Add(ctx, 0, with(d, attribute.String(attrEvent, EventCacheMiss), attribute.String(attrReason, r)))
	}
	for _, dir := range []string{"up", "down"} {
		in.timeoutChanges.Add(ctx, 0, with(d, attribute.String("direction", dir)))
	}
	for _, from := range breakerStates {
		for _, to := range breakerStates {
			if from != to {
				in.transitions.Add(ctx, 0, transitionAttrs(resilience.StateChange{Dependency: dep, From: from, To: to}))
			}
		}
	}
}

// breakerValue is orderagg_breaker_state's value for s; the numbers are
// the runbook's, spelled out rather than taken from resilience.State.
func breakerValue(s resilience.State) int64 {
	switch s {
	case resilience.StateClosed:
		return 0
	case resilience.StateOpen:
		return 1
	case resilience.StateHalfOpen:
		return 2
	case resilience.StateForcedOpen:
		return 3
	case resilience.StateForcedClosed:
		return 4
	}
	return -1
}

// State is what the gauges read at scrape time, so they cost nothing
// between scrapes and agree with /v1/resilience. A nil field leaves its
// gauges out.
type State struct {
	// Guards: breaker state, bulkhead in use, capacity and queued, the
	// sub-budget in force, whether it adapts, and the recommended one; every
	// guard, the cache's included. Their counters start at 0.
	Guards []*resilience.Guard
	// Admission: the order-detail admission limit and the requests holding
	// a slot now.
	Admission func() (limit, inflight int)
	// CacheQueue: the entries waiting for a cache writer and the queue's size.
	CacheQueue func() (queued, capacity int)
	// Connections: client connections a listener holds open now, by server
	// name ("api", "admin").
	Connections map[string]func() int64
}

// Observe registers the gauges of s and starts each guard's counters at 0.
// Call it once, at start-up.
func (t *Telemetry) Observe(s State) error {
	var errs []error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := t.meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	seconds := func(name, desc string) metric.Float64ObservableGauge {
		g, err := t.meter.Float64ObservableGauge(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	state := gauge("orderagg_breaker_state", "", "Circuit breaker state: 0 closed, 1 open, 2 half-open, 3 forced open, 4 forced closed.")
	inUse := gauge("orderagg_bulkhead_in_use", "{call}", "Calls holding a bulkhead slot now.")
	capacity := gauge("orderagg_bulkhead_capacity", "{call}", "Bulkhead size in force (max concurrent calls).")
	queued := gauge("orderagg_bulkhead_queued", "{call}", "Calls waiting for a bulkhead slot now.")
	timeout := seconds("orderagg_dependency_timeout", "Sub-budget in force for one call, retries and hedges included.")
	recommended := seconds("orderagg_dependency_recommended_timeout", "max(3×P99, 2×P99.9) + margin over the rolling window; 0 without latency history.")
	adaptive := gauge("orderagg_dependency_timeout_adaptive", "", "1 when the sub-budget adapts to latency (timeout: auto), 0 when fixed.")
	limit := gauge("orderagg_admission_limit", "{request}", "Order-detail requests admitted at once at most, now.")
	inflight := gauge("orderagg_admission_inflight", "{request}", "Order-detail requests holding an admission slot now.")
	cacheQueue := gauge("orderagg_cache_write_queue", "{entry}", "Entries waiting for a cache writer now.")
	cacheCapacity := gauge("orderagg_cache_write_queue_capacity", "{entry}", "Size of the cache write queue.")
	conns := gauge("orderagg_http_open_connections", "{connection}", "Client connections a listener holds open now, by server.")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: gauges: %w", err)
	}
	for _, g := range s.Guards {
		t.inst.zeroDependency(g.Name())
	}
	_, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, g := range s.Guards {
			snap, d := g.Snapshot(), with(dependency(g.Name()))
			o.ObserveInt64(state, breakerValue(snap.Breaker), d)
			o.ObserveInt64(inUse, snap.InUse, d)
			o.ObserveInt64(capacity, snap.Capacity, d)
			o.ObserveInt64(queued, snap.Queued, d)
			o.ObserveFloat64(timeout, snap.Timeout.Seconds(), d)
			o.ObserveFloat64(recommended, snap.RecommendedTimeout.Seconds(), d)
			o.ObserveInt64(adaptive, oneIf(snap.AutoTimeout), d)
		}
		if s.Admission != nil {
			l, n := s.Admission()
			o.ObserveInt64(limit, int64(l))
			o.ObserveInt64(inflight, int64(n))
		}
		if s.CacheQueue != nil {
			n, c := s.CacheQueue()
			o.ObserveInt64(cacheQueue, int64(n))
			o.ObserveInt64(cacheCapacity, int64(c))
		}
		for name, open := range s.Connections {
			o.ObserveInt64(conns, open(), with(attribute.String("server", name)))
		}
		return nil
	}, state, inUse, capacity, queued, timeout, recommended, adaptive, limit, inflight, cacheQueue, cacheCapacity, conns)
	if err != nil {
		return fmt.Errorf("telemetry: gauges: %w", err)
	}
	return nil
}

func oneIf(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
