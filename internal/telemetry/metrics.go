package telemetry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/orderagg/orderagg/internal/resilience"
)

// Instrument names. The Prometheus exporter appends _total to counters and
// the unit (_seconds) to instruments measured in seconds; docs/runbook.md
// lists the names as scraped, and a test holds the two in step.
const (
	nameEvents             = "orderagg_dependency_events"
	nameCalls              = "orderagg_dependency_calls"
	nameRetries            = "orderagg_dependency_retries"
	nameHedges             = "orderagg_dependency_hedges"
	nameAttemptDuration    = "orderagg_dependency_attempt_duration"
	nameTimeout            = "orderagg_dependency_timeout"
	nameRecommendedTimeout = "orderagg_dependency_recommended_timeout"
	nameTimeoutAdaptive    = "orderagg_dependency_timeout_adaptive"
	nameTimeoutChanges     = "orderagg_dependency_timeout_changes"
	nameBreakerState       = "orderagg_breaker_state"
	nameBreakerTransitions = "orderagg_breaker_transitions"
	nameBulkheadInUse      = "orderagg_bulkhead_in_use"
	nameBulkheadCapacity   = "orderagg_bulkhead_capacity"
	nameBulkheadQueued     = "orderagg_bulkhead_queued"
	nameCacheReads         = "orderagg_cache_reads"
	nameCacheWrites        = "orderagg_cache_writes"
	nameCacheQueue         = "orderagg_cache_write_queue"
	nameCacheQueueCapacity = "orderagg_cache_write_queue_capacity"
	nameOpenConnections    = "orderagg_http_open_connections"
	nameAdmissionLimit     = "orderagg_admission_limit"
	nameAdmissionInflight  = "orderagg_admission_inflight"
	nameAdmissionRejected  = "orderagg_admission_rejected"
	nameRequests           = "orderagg_http_requests"
	nameRequestDuration    = "orderagg_http_request_duration"
)

// Attribute keys of the metrics.
const (
	attrDependency = "dependency"
	attrEvent      = "event"
	attrReason     = "reason"
	attrFrom       = "from"
	attrTo         = "to"
	attrOutcome    = "outcome"
	attrStatus     = "status"
	attrDegraded   = "degraded"
	attrServer     = "server"
	attrDirection  = "direction"
)

// Event names of orderagg_dependency_events_total beyond resilience's own
// (success … fallback_failure): the last-good lookups the aggregator reports.
const (
	EventCacheHit  = "cache_hit"
	EventCacheMiss = "cache_miss"
)

// latencyBuckets (seconds) resolve the sub-budgets: fine steps where
// downstreams normally answer (1–100 ms), and a boundary near every budget
// an operator is likely to set, up to the 1500 ms deadline and beyond it.
var latencyBuckets = []float64{
	0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15,
	0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 1.5, 2,
}

// instruments are the meter's instruments. The per-dependency counters
// (events, calls, retries, hedges) are observable: each series is an atomic
// counter in depAttrs that the hot path increments and a scrape reads, as
// the cache's counters are. A synchronous OpenTelemetry Add cost ~1 µs per
// measurement under load (attribute-set lookup, exemplar filter walking the
// request's context chain), about nine per page: 2–3 % of a healthy page's
// CPU, see docs/design.md. The histograms stay synchronous; the gauges and
// the cache's counters are registered by ObserveGuards and ObserveCache.
type instruments struct {
	events      metric.Int64ObservableCounter
	calls       metric.Int64ObservableCounter
	retries     metric.Int64ObservableCounter
	hedges      metric.Int64ObservableCounter
	attempt     metric.Float64Histogram
	transitions metric.Int64Counter
	toChanges   metric.Int64Counter
	requests    metric.Int64Counter
	reqDuration metric.Float64Histogram
	rejected    metric.Int64Counter
}

func (in *instruments) init(m metric.Meter, deps *cowMap[*depAttrs]) error {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	observed := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(latencyBuckets...))
		errs = append(errs, err)
		return h
	}
	in.events = observed(nameEvents, "{event}",
		"Guarded dependency events, one series per event kind: success, failure, timeout, short_circuited, rejected, bad_request, deadline, fallback_success, fallback_failure, cache_hit, cache_miss (with reason).")
	in.calls = observed(nameCalls, "{call}",
		"Logical guarded calls, whether or not they reached the dependency; retries and hedges are not extra calls.")
	in.retries = observed(nameRetries, "{attempt}", "Retry attempts (second and later attempts of a call, hedges excluded).")
	in.hedges = observed(nameHedges, "{attempt}", "Hedged (backup) attempts started.")
	in.attempt = histogram(nameAttemptDuration, "Duration of each physical attempt, by dependency and outcome.")
	in.transitions = counter(nameBreakerTransitions, "{transition}", "Circuit breaker state changes, operator overrides included.")
	in.toChanges = counter(nameTimeoutChanges, "{change}", "Moves of an adaptive sub-budget (timeout: auto), by direction: up or down.")
	in.requests = counter(nameRequests, "{request}", "Order-detail answers by HTTP status and degraded flag.")
	in.rejected = counter(nameAdmissionRejected, "{request}", "Order-detail requests refused at admission (503 OVERLOADED), before any work.")
	in.reqDuration = histogram(nameRequestDuration, "Order-detail request duration, arrival to answer, by HTTP status and degraded flag.")
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, d := range deps.all() {
			d.observe(in, o)
		}
		return nil
	}, in.events, in.calls, in.retries, in.hedges)
	return err
}

// opts is one attribute set, ready to pass to Add, Record or Observe. The option
// slices are built once: a variadic call to an interface method would
// otherwise allocate a fresh slice on every measurement.
type opts struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

func newOpts(kvs ...attribute.KeyValue) opts {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return opts{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, obs: []metric.ObserveOption{o}}
}

// series is one counter series: its attributes and its count so far.
type series struct {
	opts
	n atomic.Int64
}

func newSeries(kvs ...attribute.KeyValue) *series { return &series{opts: newOpts(kvs...)} }

// depAttrs are one dependency's counter series and precomputed attribute
// sets. Building an attribute set sorts and hashes; doing it once per
// dependency instead of per event keeps OnEvent free of allocations.
type depAttrs struct {
	name    string
	calls   *series         // {dependency}
	retries *series         // {dependency}
	hedges  *series         // {dependency}
	events  cowMap[*series] // {dependency, event} by event name
	misses  cowMap[*series] // {dependency, event=cache_miss, reason} by reason

	spanName     string // "dependency inventory"
	fallbackName string // "fallback inventory"
	spanDep      attribute.KeyValue
}

// knownEvents are the event names series are prebuilt for. Every prebuilt
// series is exported from start-up, at 0 until it happens: increase() and
// rate() then see the first breaker trip or fallback as a rise from 0, not
// as a series that appears already at 1 (which they read as no change).
var knownEvents = []string{
	"success", "failure", "timeout", "short_circuited", "rejected", "bad_request", "deadline",
	"fallback_success", "fallback_failure", EventCacheHit,
}

// knownMissReasons are the reasons orderdetail.Observer reports for a miss.
var knownMissReasons = []string{"absent", "stale", "corrupt", "error"}

// newDepAttrs builds dep's series, every known event and miss reason among
// them; a name not listed (a kind resilience may add later) gets its series
// on first sight.
func newDepAttrs(dep string) *depAttrs {
	depKV := attribute.String(attrDependency, dep)
	d := &depAttrs{
		name:         dep,
		calls:        newSeries(depKV),
		retries:      newSeries(depKV),
		hedges:       newSeries(depKV),
		spanName:     "dependency " + dep,
		fallbackName: "fallback " + dep,
		spanDep:      attrSpanDependency.String(dep),
	}
	d.events.build = func(event string) *series {
		return newSeries(depKV, attribute.String(attrEvent, event))
	}
	d.misses.build = func(reason string) *series {
		return newSeries(depKV, attribute.String(attrEvent, EventCacheMiss), attribute.String(attrReason, reason))
	}
	for _, ev := range knownEvents {
		d.events.get(ev)
	}
	for _, r := range knownMissReasons {
		d.misses.get(r)
	}
	return d
}

func (d *depAttrs) event(name string) *series  { return d.events.get(name) }
func (d *depAttrs) miss(reason string) *series { return d.misses.get(reason) }

// observe reports every series of d to a scrape.
func (d *depAttrs) observe(in *instruments, o metric.Observer) {
	o.ObserveInt64(in.calls, d.calls.n.Load(), d.calls.obs...)
	o.ObserveInt64(in.retries, d.retries.n.Load(), d.retries.obs...)
	o.ObserveInt64(in.hedges, d.hedges.n.Load(), d.hedges.obs...)
	for _, s := range d.events.all() {
		o.ObserveInt64(in.events, s.n.Load(), s.obs...)
	}
	for _, s := range d.misses.all() {
		o.ObserveInt64(in.events, s.n.Load(), s.obs...)
	}
}

// cowMap is a map from a name (a dependency's, an event's, a miss
// reason's) to state for the hot path: a read is one atomic load and a map
// lookup, with no lock to contend on; a new name (a handful per process
// lifetime) copies the map.
type cowMap[V any] struct {
	mu    sync.Mutex
	m     atomic.Pointer[map[string]V]
	build func(name string) V
}

// all returns every value in the map, for a scrape.
func (c *cowMap[V]) all() map[string]V {
	if m := c.m.Load(); m != nil {
		return *m
	}
	return nil
}

func (c *cowMap[V]) get(name string) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[name]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[name]; ok {
			return v
		}
	}
	next := make(map[string]V, 8)
	if old != nil {
		maps.Copy(next, *old)
	}
	v := c.build(name)
	next[name] = v
	c.m.Store(&next)
	return v
}

// RecordRequest counts one order-detail answer by HTTP status and degraded
// flag and records its duration (arrival to answer). Call it once per
// GET /v1/orders/{id}, whatever the status, with the request's context: the
// server span gets orderagg.degraded, and the latency histogram can carry the
// trace as an exemplar.
func (t *Telemetry) RecordRequest(ctx context.Context, status int, degraded bool, d time.Duration) {
	o := requestAttrs(status, degraded)
	t.inst.requests.Add(ctx, 1, o.add...)
	t.inst.reqDuration.Record(ctx, d.Seconds(), o.rec...)
	if t.tracing {
		trace.SpanFromContext(ctx).SetAttributes(attrSpanDegraded.Bool(degraded))
	}
}

// RecordRejected counts one order-detail request refused at admission. It
// is also in orderagg_http_requests_total as a 503, beside the 503s of an
// unavailable order; this counter tells the two apart.
func (t *Telemetry) RecordRejected(ctx context.Context) { t.inst.rejected.Add(ctx, 1) }

// requestKey indexes the few status × degraded attribute sets that occur.
type requestKey struct {
	status   int
	degraded bool
}

var requestOpts sync.Map // requestKey → opts

func requestAttrs(status int, degraded bool) opts {
	k := requestKey{status, degraded}
	if o, ok := requestOpts.Load(k); ok {
		return o.(opts)
	}
	o := newOpts(attribute.String(attrStatus, strconv.Itoa(status)), attribute.Bool(attrDegraded, degraded))
	requestOpts.Store(k, o)
	return o
}

// Breaker state values of orderagg_breaker_state. They are part of the
// runbook's contract, so they are spelled out rather than taken from the
// order of resilience.State.
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

// ObserveGuards exports each guard's state as gauges read at scrape time:
// breaker state (0 closed, 1 open, 2 half-open, 3 forced open, 4 forced
// closed), bulkhead in use, capacity and queued, the sub-budget in force
// (the learnt one under timeout: auto), whether it adapts, and the
// recommended one. Reading at scrape time means the gauges cost
// nothing between scrapes and always agree with /v1/resilience. Call it once
// with every guard, the cache's included.
func (t *Telemetry) ObserveGuards(guards []*resilience.Guard) error {
	var errs []error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := t.meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	fgauge := func(name, desc string) metric.Float64ObservableGauge {
		g, err := t.meter.Float64ObservableGauge(name, metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	state := gauge(nameBreakerState, "", "Circuit breaker state: 0 closed, 1 open, 2 half-open, 3 forced open, 4 forced closed.")
	inUse := gauge(nameBulkheadInUse, "{call}", "Calls holding a bulkhead slot now.")
	capacity := gauge(nameBulkheadCapacity, "{call}", "Bulkhead size in force (max concurrent calls).")
	queued := gauge(nameBulkheadQueued, "{call}", "Calls waiting for a bulkhead slot now.")
	timeout := fgauge(nameTimeout, "Sub-budget in force for one call, retries and hedges included.")
	recommended := fgauge(nameRecommendedTimeout, "max(3×P99, 2×P99.9) + margin over the rolling window; 0 without latency history.")
	adaptive := gauge(nameTimeoutAdaptive, "", "1 when the sub-budget adapts to latency (timeout: auto), 0 when fixed.")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: guard gauges: %w", err)
	}

	attrs := make([]metric.MeasurementOption, len(guards))
	for i, g := range guards {
		attrs[i] = metric.WithAttributeSet(attribute.NewSet(attribute.String(attrDependency, g.Name())))
	}
	names := make([]string, len(guards))
	for i, g := range guards {
		names[i] = g.Name()
	}
	t.zeroSeries(names)
	_, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i, g := range guards {
			s := g.Snapshot()
			o.ObserveInt64(state, breakerValue(s.Breaker), attrs[i])
			o.ObserveInt64(inUse, s.InUse, attrs[i])
			o.ObserveInt64(capacity, s.Capacity, attrs[i])
			o.ObserveInt64(queued, s.Queued, attrs[i])
			o.ObserveFloat64(timeout, s.Timeout.Seconds(), attrs[i])
			o.ObserveFloat64(recommended, s.RecommendedTimeout.Seconds(), attrs[i])
			var auto int64
			if s.AutoTimeout {
				auto = 1
			}
			o.ObserveInt64(adaptive, auto, attrs[i])
		}
		return nil
	}, state, inUse, capacity, queued, timeout, recommended, adaptive)
	if err != nil {
		return fmt.Errorf("telemetry: guard gauges: %w", err)
	}
	return nil
}

// zeroSeries makes every counter series a dependency can have exist from
// start-up, at 0: increase() and rate() then see the first breaker trip or
// fallback as a rise from 0, not as a series that appears already at 1
// (which they read as no change). The observed counters export all their
// prebuilt series once the dependency is known; the synchronous ones get an
// Add of 0.
func (t *Telemetry) zeroSeries(deps []string) {
	ctx := context.Background()
	in := &t.inst
	for _, dep := range deps {
		t.deps.get(dep)
		for _, dir := range []string{directionUp, directionDown} {
			in.toChanges.Add(ctx, 0, timeoutChangeAttrs(dep, dir))
		}
		for from := range resilience.State(numStates) {
			for to := range resilience.State(numStates) {
				if from != to {
					in.transitions.Add(ctx, 0, transitionAttrs(resilience.StateChange{Dependency: dep, From: from, To: to}))
				}
			}
		}
	}
}

// numStates counts the breaker states (closed … forced closed).
const numStates = 5

// CacheStats are the last-good store's counters since it opened. The fields
// match internal/cache.Stats one for one, so main can convert with
// telemetry.CacheStats(store.Stats()) and the compiler tells whoever changes
// one that the other must follow.
type CacheStats struct {
	Hits       uint64 // reads that returned an entry
	Misses     uint64 // reads of an absent or expired key
	Corrupt    uint64 // reads of a value that could not be served
	ReadErrors uint64 // reads that failed (store unreachable, timeout)

	WritesOK      uint64 // writes that replaced the stored value
	WritesStale   uint64 // writes skipped: the stored answer was as new or newer
	WritesDropped uint64 // entries dropped before writing: queue full or store closed
	WriteErrors   uint64 // writes that failed or timed out

	Queued        int // entries waiting for a writer now
	QueueCapacity int // the write queue's size
}

// ObserveCache exports the last-good store's counters, read at scrape time:
// reads by outcome (hit, miss, corrupt, error), writes by outcome (ok, stale,
// dropped, error) and the write queue's depth and capacity. stats must be
// cheap and safe to call from any goroutine.
func (t *Telemetry) ObserveCache(stats func() CacheStats) error {
	reads, err1 := t.meter.Int64ObservableCounter(nameCacheReads, metric.WithUnit("{read}"),
		metric.WithDescription("Last-good store reads by outcome: hit, miss, corrupt, error."))
	writes, err2 := t.meter.Int64ObservableCounter(nameCacheWrites, metric.WithUnit("{write}"),
		metric.WithDescription("Last-good store writes by outcome: ok, stale (a newer answer was stored), dropped (queue full), error."))
	queue, err3 := t.meter.Int64ObservableGauge(nameCacheQueue, metric.WithUnit("{entry}"),
		metric.WithDescription("Entries waiting for a cache writer now."))
	capacity, err4 := t.meter.Int64ObservableGauge(nameCacheQueueCapacity, metric.WithUnit("{entry}"),
		metric.WithDescription("Size of the cache write queue."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fmt.Errorf("telemetry: cache metrics: %w", err)
	}
	outcome := func(v string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String(attrOutcome, v)))
	}
	var (
		hit, miss, corrupt, rerr  = outcome("hit"), outcome("miss"), outcome("corrupt"), outcome("error")
		wok, stale, dropped, werr = outcome("ok"), outcome("stale"), outcome("dropped"), outcome("error")
	)
	_, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := stats()
		o.ObserveInt64(reads, clampInt64(s.Hits), hit)
		o.ObserveInt64(reads, clampInt64(s.Misses), miss)
		o.ObserveInt64(reads, clampInt64(s.Corrupt), corrupt)
		o.ObserveInt64(reads, clampInt64(s.ReadErrors), rerr)
		o.ObserveInt64(writes, clampInt64(s.WritesOK), wok)
		o.ObserveInt64(writes, clampInt64(s.WritesStale), stale)
		o.ObserveInt64(writes, clampInt64(s.WritesDropped), dropped)
		o.ObserveInt64(writes, clampInt64(s.WriteErrors), werr)
		o.ObserveInt64(queue, int64(s.Queued))
		o.ObserveInt64(capacity, int64(s.QueueCapacity))
		return nil
	}, reads, writes, queue, capacity)
	if err != nil {
		return fmt.Errorf("telemetry: cache metrics: %w", err)
	}
	return nil
}

// ObserveConnections reports the client connections a listener holds open
// now, labelled server=name ("api", "admin"). After a burst of load it must
// come back down as clients go away: connections that stay are a leak, or
// clients that never let go.
func (t *Telemetry) ObserveConnections(name string, open func() int64) error {
	g, err := t.meter.Int64ObservableGauge(nameOpenConnections, metric.WithUnit("{connection}"),
		metric.WithDescription("Client connections a listener holds open now, by server."))
	if err != nil {
		return fmt.Errorf("telemetry: connection metrics: %w", err)
	}
	set := metric.WithAttributeSet(attribute.NewSet(attribute.String(attrServer, name)))
	if _, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, open(), set)
		return nil
	}, g); err != nil {
		return fmt.Errorf("telemetry: connection metrics: %w", err)
	}
	return nil
}

// ObserveAdmission reports the order-detail admission limit in force
// (--max-inflight) and the requests holding a slot now.
func (t *Telemetry) ObserveAdmission(limit, inflight func() int) error {
	l, err1 := t.meter.Int64ObservableGauge(nameAdmissionLimit, metric.WithUnit("{request}"),
		metric.WithDescription("Order-detail requests admitted at once at most, now."))
	f, err2 := t.meter.Int64ObservableGauge(nameAdmissionInflight, metric.WithUnit("{request}"),
		metric.WithDescription("Order-detail requests holding an admission slot now."))
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("telemetry: admission metrics: %w", err)
	}
	if _, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(l, int64(limit()))
		o.ObserveInt64(f, int64(inflight()))
		return nil
	}, l, f); err != nil {
		return fmt.Errorf("telemetry: admission metrics: %w", err)
	}
	return nil
}

func clampInt64(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}
