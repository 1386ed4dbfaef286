package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/orderagg/orderagg/internal/cache"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// latencyBuckets (seconds) are the runbook's.
var latencyBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 1.5, 2}

// Label values exported at 0 from start-up, so that rate() sees the first
// failure as a rise from 0 and a ratio reads 0 rather than "no data";
// pageAnswers are the status × degraded pairs the order-detail handler writes.
var (
	pageAnswers = []struct {
		status   int
		degraded bool
	}{{200, false}, {200, true}, {400, false}, {404, false}, {500, false}, {503, false}}
	knownEvents = []string{"success", "failure", "timeout", "short_circuited", "rejected", "bad_request", "deadline",
		"fallback_success", "fallback_failure", "cache_hit"}
	knownMissReasons = []string{"absent", "stale", "corrupt", "error"}
	// breakerValues are orderagg_breaker_state's values, as the runbook lists them.
	breakerValues = map[resilience.State]float64{resilience.StateClosed: 0, resilience.StateOpen: 1,
		resilience.StateHalfOpen: 2, resilience.StateForcedOpen: 3, resilience.StateForcedClosed: 4}
)

// instruments are the synchronous instruments; the Prometheus exporter
// appends _total to counters and _seconds to instruments in seconds.
type instruments struct {
	events, calls, retries, transitions, timeoutChanges, requests, rejected metric.Int64Counter
	attempt, requestDuration                                                metric.Float64Histogram
}

func newInstruments(m metric.Meter) (*instruments, error) {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(latencyBuckets...))
		errs = append(errs, err)
		return h
	}
	in := &instruments{
		events:          counter("orderagg_dependency_events", "{event}", "Guarded dependency events, one series per event kind: success, failure, timeout, short_circuited, rejected, bad_request, deadline, fallback_success, fallback_failure, cache_hit, cache_miss (with reason)."),
		calls:           counter("orderagg_dependency_calls", "{call}", "Logical guarded calls, whether or not they reached the dependency; retries are not extra calls."),
		retries:         counter("orderagg_dependency_retries", "{attempt}", "Retry attempts (second and later attempts of a call)."),
		transitions:     counter("orderagg_breaker_transitions", "{transition}", "Circuit breaker state changes, operator overrides included."),
		timeoutChanges:  counter("orderagg_dependency_timeout_changes", "{change}", "Moves of an adaptive sub-budget (timeout: auto), by direction: up or down."),
		requests:        counter("orderagg_http_requests", "{request}", "Order-detail answers by HTTP status and degraded flag."),
		rejected:        counter("orderagg_admission_rejected", "{request}", "Order-detail requests refused at admission (503 OVERLOADED), before any work."),
		attempt:         histogram("orderagg_dependency_attempt_duration", "Duration of each physical attempt, by dependency and outcome."),
		requestDuration: histogram("orderagg_http_request_duration", "Order-detail request duration, arrival to answer, by HTTP status and degraded flag."),
	}
	for _, a := range pageAnswers {
		in.requests.Add(context.Background(), 0, requestAttrs(a.status, a.degraded))
	}
	in.rejected.Add(context.Background(), 0)
	return in, errors.Join(errs...)
}

func with(kvs ...attribute.KeyValue) metric.MeasurementOption { return metric.WithAttributes(kvs...) }

func dependency(dep string) attribute.KeyValue { return attribute.String("dependency", dep) }

func requestAttrs(status int, degraded bool) metric.MeasurementOption {
	return with(attribute.String("status", strconv.Itoa(status)), attribute.Bool("degraded", degraded))
}

func transitionAttrs(dep string, from, to resilience.State) metric.MeasurementOption {
	return with(dependency(dep), attribute.String("from", from.String()), attribute.String("to", to.String()))
}

// RecordRequest counts one order-detail answer by HTTP status and degraded
// flag and records its duration; call it once per GET /v1/orders/{id},
// whatever the status, with the request's context. The server span gets
// orderagg.degraded, and the histogram the trace as an exemplar.
func (t *Telemetry) RecordRequest(ctx context.Context, status int, degraded bool, d time.Duration) {
	attrs := requestAttrs(status, degraded)
	t.in.requests.Add(ctx, 1, attrs)
	t.in.requestDuration.Record(ctx, d.Seconds(), attrs)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("orderagg.degraded", degraded))
}

// RecordRejected counts one order-detail request refused at admission,
// which is also among the 503s of RecordRequest.
func (t *Telemetry) RecordRejected(ctx context.Context) { t.in.rejected.Add(ctx, 1) }

// State is what the observable instruments read at scrape time; a nil
// field leaves its series out.
type State struct {
	Guards    []*resilience.Guard // breaker, bulkhead and sub-budget of each; their counters start at 0
	Admission func() (limit, inflight int)
	Cache     func() cache.Stats // the last-good store's outcomes and write queue
}

// Observe registers the observable instruments of s and starts each
// guard's counters at 0. Call it once, at start-up.
func (t *Telemetry) Observe(s State) error {
	var errs []error
	gauge := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, err := t.meter.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	counter := func(name, unit, desc string) metric.Float64ObservableCounter {
		c, err := t.meter.Float64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	state := gauge("orderagg_breaker_state", "", "Circuit breaker state: 0 closed, 1 open, 2 half-open, 3 forced open, 4 forced closed.")
	inUse := gauge("orderagg_bulkhead_in_use", "{call}", "Calls holding a bulkhead slot now.")
	capacity := gauge("orderagg_bulkhead_capacity", "{call}", "Bulkhead size in force (max concurrent calls).")
	queued := gauge("orderagg_bulkhead_queued", "{call}", "Calls waiting for a bulkhead slot now.")
	timeout := gauge("orderagg_dependency_timeout", "s", "Sub-budget in force for one call, retries included.")
	recommended := gauge("orderagg_dependency_recommended_timeout", "s", "max(3×P99, 2×P99.9) + margin over the rolling window; 0 without latency history.")
	adaptive := gauge("orderagg_dependency_timeout_adaptive", "", "1 when the sub-budget adapts to latency (timeout: auto), 0 when fixed.")
	limit := gauge("orderagg_admission_limit", "{request}", "Order-detail requests admitted at once at most, now.")
	inflight := gauge("orderagg_admission_inflight", "{request}", "Order-detail requests holding an admission slot now.")
	reads := counter("orderagg_cache_reads", "{read}", "Last-good store reads by outcome: hit, miss, corrupt, error.")
	writes := counter("orderagg_cache_writes", "{write}", "Last-good store writes by outcome: ok, stale (a newer answer was stored), dropped (queue full), error.")
	queue := gauge("orderagg_cache_write_queue", "{entry}", "Entries waiting for a cache writer now.")
	queueCap := gauge("orderagg_cache_write_queue_capacity", "{entry}", "Size of the cache write queue.")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: gauges: %w", err)
	}
	for _, g := range s.Guards {
		t.startAtZero(g.Name())
	}
	_, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, g := range s.Guards {
			snap, d := g.Snapshot(), with(dependency(g.Name()))
			var rec, auto float64
			if snap.RecommendedTimeout != nil {
				rec = time.Duration(*snap.RecommendedTimeout).Seconds()
			}
			if snap.TimeoutMode == "auto" {
				auto = 1
			}
			o.ObserveFloat64(state, breakerValues[snap.Breaker], d)
			o.ObserveFloat64(inUse, float64(snap.Bulkhead.InUse), d)
			o.ObserveFloat64(capacity, float64(snap.Bulkhead.Capacity), d)
			o.ObserveFloat64(queued, float64(snap.Bulkhead.Queued), d)
			o.ObserveFloat64(timeout, time.Duration(snap.Timeout).Seconds(), d)
			o.ObserveFloat64(recommended, rec, d)
			o.ObserveFloat64(adaptive, auto, d)
		}
		if s.Admission != nil {
			l, n := s.Admission()
			o.ObserveFloat64(limit, float64(l))
			o.ObserveFloat64(inflight, float64(n))
		}
		if s.Cache != nil {
			st := s.Cache()
			for outcome, n := range map[string]uint64{"hit": st.Hits, "miss": st.Misses, "corrupt": st.Corrupt, "error": st.ReadErrors} {
				o.ObserveFloat64(reads, float64(n), with(attribute.String("outcome", outcome)))
			}
			for outcome, n := range map[string]uint64{"ok": st.WritesOK, "stale": st.WritesStale, "dropped": st.WritesDropped, "error": st.WriteErrors} {
				o.ObserveFloat64(writes, float64(n), with(attribute.String("outcome", outcome)))
			}
			o.ObserveFloat64(queue, float64(st.Queued))
			o.ObserveFloat64(queueCap, float64(st.QueueCapacity))
		}
		return nil
	}, state, inUse, capacity, queued, timeout, recommended, adaptive, limit, inflight, reads, writes, queue, queueCap)
	if err != nil {
		return fmt.Errorf("telemetry: gauges: %w", err)
	}
	return nil
}

// startAtZero starts dep's counters at 0 for every known label value.
func (t *Telemetry) startAtZero(dep string) {
	ctx, d := context.Background(), dependency(dep)
	for _, c := range []metric.Int64Counter{t.in.calls, t.in.retries} {
		c.Add(ctx, 0, with(d))
	}
	for _, ev := range knownEvents {
		t.in.events.Add(ctx, 0, with(d, attribute.String("event", ev)))
	}
	for _, r := range knownMissReasons {
		t.in.events.Add(ctx, 0, missAttrs(dep, r))
	}
	for _, dir := range []string{"up", "down"} {
		t.in.timeoutChanges.Add(ctx, 0, with(d, attribute.String("direction", dir)))
	}
	for from := range breakerValues {
		for to := range breakerValues {
			if from != to {
				t.in.transitions.Add(ctx, 0, transitionAttrs(dep, from, to))
			}
		}
	}
}

func missAttrs(dep, reason string) metric.MeasurementOption {
	return with(dependency(dep), attribute.String("event", "cache_miss"), attribute.String("reason", reason))
}

// Listener turns what the guards and the page report into metrics and log
// lines: a fallback at WARN, at most one line per dependency a second, with
// how many were suppressed and the cause it stands in for; a breaker
// transition at WARN when it opens or is forced, at INFO otherwise; a
// sub-budget's move at INFO. It is safe for concurrent use.
type Listener struct {
	in        *instruments
	log       *slog.Logger
	sets      sync.Map // eventSet → metric.MeasurementOption, built once per pair
	fallbacks sync.Map // dependency → *logLimit
}

var (
	_ resilience.TimeoutListener = (*Listener)(nil)
	_ orderdetail.Observer       = (*Listener)(nil)
)

// Listener is this Telemetry's one Listener: give it to every
// resilience.WithListener and to orderdetail.Config.Observer.
func (t *Telemetry) Listener() *Listener { return t.listener }

// eventSet names the attributes of an event's series; event is empty for
// the series labelled by dependency alone. Both come from fixed sets (the
// registry's dependencies, the event names), so the cache is bounded.
type eventSet struct{ dep, event string }

// attrs returns the attribute set of (dep, event), computed on first use.
func (l *Listener) attrs(dep, event string) metric.MeasurementOption {
	k := eventSet{dep, event}
	if o, ok := l.sets.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	kvs := []attribute.KeyValue{dependency(dep)}
	if event != "" {
		kvs = append(kvs, attribute.String("event", event))
	}
	o, _ := l.sets.LoadOrStore(k, with(kvs...))
	return o.(metric.MeasurementOption)
}

// OnEvent counts e and logs a fallback.
func (l *Listener) OnEvent(ctx context.Context, e resilience.Event) {
	ev := l.attrs(e.Dependency, e.Name())
	l.in.events.Add(ctx, 1, ev)
	if e.Fallback {
		l.logFallback(ctx, e)
		return
	}
	if e.Attempt > 0 {
		l.in.attempt.Record(ctx, e.Duration.Seconds(), ev)
	}
	if e.Attempt <= 1 { // the first attempt, or a call refused before any
		l.in.calls.Add(ctx, 1, l.attrs(e.Dependency, ""))
	} else {
		l.in.retries.Add(ctx, 1, l.attrs(e.Dependency, ""))
	}
}

func (l *Listener) logFallback(ctx context.Context, e resilience.Event) {
	limit, found := l.fallbacks.Load(e.Dependency)
	if !found {
		limit, _ = l.fallbacks.LoadOrStore(e.Dependency, newLogLimit())
	}
	ok, suppressed := limit.(*logLimit).allow()
	if !ok {
		return
	}
	attrs := []slog.Attr{slog.String("dependency", e.Dependency), slog.String("event", e.Name())}
	if e.Cause != nil {
		attrs = append(attrs, slog.String("cause", resilience.KindOf(e.Cause).String()), slog.String("error", e.Cause.Error()))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("fallback_error", e.Err.Error()))
	}
	l.log.LogAttrs(ctx, slog.LevelWarn, "dependency fallback", append(attrs, slog.Int64("suppressed", suppressed))...)
}

// OnStateChange counts and logs a breaker transition.
func (l *Listener) OnStateChange(c resilience.StateChange) {
	l.in.transitions.Add(context.Background(), 1, transitionAttrs(c.Dependency, c.From, c.To))
	level := slog.LevelInfo
	if c.To == resilience.StateOpen || c.To == resilience.StateForcedOpen || c.To == resilience.StateForcedClosed {
		level = slog.LevelWarn
	}
	l.log.LogAttrs(context.Background(), level, "circuit breaker "+c.To.String(), slog.String("dependency", c.Dependency),
		slog.String("from", c.From.String()), slog.String("to", c.To.String()), slog.Time("at", c.At))
}

// OnTimeoutChange counts and logs an adaptive sub-budget's move.
func (l *Listener) OnTimeoutChange(c resilience.TimeoutChange) {
	dir := "up"
	if c.To < c.From {
		dir = "down"
	}
	l.in.timeoutChanges.Add(context.Background(), 1, with(dependency(c.Dependency), attribute.String("direction", dir)))
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "adaptive timeout "+dir, slog.String("dependency", c.Dependency),
		slog.Duration("from", c.From), slog.Duration("to", c.To), slog.Duration("recommended", c.Recommended),
		slog.Int64("successes", c.Successes), slog.Time("at", c.At))
}

// CacheLookup counts a last-good lookup for dep, a hit as event cache_hit,
// a miss as cache_miss with its reason, and adds a "cache lookup" event to
// the span in ctx.
func (l *Listener) CacheLookup(ctx context.Context, dep, outcome string) {
	attrs := l.attrs(dep, "cache_hit")
	if outcome != "hit" {
		attrs = missAttrs(dep, outcome)
	}
	l.in.events.Add(ctx, 1, attrs)
	trace.SpanFromContext(ctx).AddEvent("cache lookup",
		trace.WithAttributes(attrSpanDependency.String(dep), attribute.String("orderagg.cache.outcome", outcome)))
}

// logLimit lets one line through a second and counts the lines it held
// back; it is safe for concurrent use.
type logLimit struct {
	lim        *rate.Limiter
	suppressed atomic.Int64
}

func newLogLimit() *logLimit { return &logLimit{lim: rate.NewLimiter(rate.Every(time.Second), 1)} }

// allow reports whether to log and, if so, how many lines were held back.
func (l *logLimit) allow() (bool, int64) {
	if !l.lim.Allow() {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
