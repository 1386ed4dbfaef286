package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/orderagg/orderagg/internal/cache"
	"github.com/orderagg/orderagg/internal/resilience"
)

// latencyBuckets (seconds) are the runbook's.
var latencyBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1, 1.5, 2}

// knownEvents and knownMissReasons (of cache_miss) are the events each
// guard's series start at 0 with.
var knownEvents = []string{"success", "failure", "timeout", "short_circuited", "rejected", "bad_request", "deadline",
	"fallback_success", "fallback_failure", "cache_hit"}
var knownMissReasons = []string{"absent", "stale", "corrupt", "error"}

// newListener makes the synchronous instruments, with the series of every
// answer the order-detail handler writes, and of admission's refusals, at
// 0. The Prometheus exporter appends _total to counters and _seconds to
// instruments in seconds.
func newListener(m metric.Meter, log *slog.Logger) (*Listener, error) {
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
	l := &Listener{log: log,
		events:          counter("orderagg_dependency_events", "{event}", "Guarded dependency events, one series per event kind: success, failure, timeout, short_circuited, rejected, bad_request, deadline, fallback_success, fallback_failure, cache_hit, cache_miss (with reason)."),
		calls:           counter("orderagg_dependency_calls", "{call}", "Logical guarded calls, whether or not they reached the dependency; retries are not extra calls."),
		transitions:     counter("orderagg_breaker_transitions", "{transition}", "Circuit breaker state changes, operator overrides included."),
		requests:        counter("orderagg_http_requests", "{request}", "Order-detail answers by HTTP status and degraded flag."),
		rejected:        counter("orderagg_admission_rejected", "{request}", "Order-detail requests refused at admission (503 OVERLOADED), before any work."),
		attempt:         histogram("orderagg_dependency_attempt_duration", "Duration of each physical attempt, by dependency and outcome."),
		requestDuration: histogram("orderagg_http_request_duration", "Order-detail request duration, arrival to answer, by HTTP status and degraded flag."),
	}
	ctx := context.Background()
	for _, status := range []int{200, 400, 404, 500, 503} {
		l.requests.Add(ctx, 0, requestAttrs(status, false))
	}
	l.requests.Add(ctx, 0, requestAttrs(200, true))
	l.rejected.Add(ctx, 0)
	return l, errors.Join(errs...)
}

func dependency(dep string) attribute.KeyValue { return attribute.String("dependency", dep) }

// attrs is the attribute set {dependency, event, reason} (event and reason
// left out when ""), built once per triple and kept: a call's events are
// counted on every page.
func (l *Listener) attrs(dep, event, reason string) metric.MeasurementOption {
	k := [3]string{dep, event, reason}
	if o, ok := l.sets.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	kv := []attribute.KeyValue{dependency(dep)}
	if event != "" {
		kv = append(kv, attribute.String("event", event))
	}
	if reason != "" {
		kv = append(kv, attribute.String("reason", reason))
	}
	o, _ := l.sets.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(kv...)))
	return o.(metric.MeasurementOption)
}

func requestAttrs(status int, degraded bool) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("status", strconv.Itoa(status)), attribute.Bool("degraded", degraded))
}

func transitionAttrs(dep string, from, to resilience.State) metric.MeasurementOption {
	return metric.WithAttributes(dependency(dep), attribute.String("from", from.String()), attribute.String("to", to.String()))
}

// RecordRequest counts one order-detail answer by HTTP status and degraded
// flag and records its duration; call it once per GET /v1/orders/{id},
// whatever the status, with the request's context. The server span gets
// orderagg.degraded, and the histogram the trace as an exemplar.
func (t *Telemetry) RecordRequest(ctx context.Context, status int, degraded bool, d time.Duration) {
	attrs := requestAttrs(status, degraded)
	t.listener.requests.Add(ctx, 1, attrs)
	t.listener.requestDuration.Record(ctx, d.Seconds(), attrs)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("orderagg.degraded", degraded))
}

// RecordRejected counts one order-detail request refused at admission,
// which is also among the 503s of RecordRequest.
func (t *Telemetry) RecordRejected(ctx context.Context) { t.listener.rejected.Add(ctx, 1) }

// State is what the observable instruments read at scrape time; a nil
// field leaves its series out.
type State struct {
	Guards    []*resilience.Guard // breaker, bulkhead and sub-budget of each
	Admission func() (limit, inflight int)
	Cache     func() cache.Stats // the last-good store's outcomes and write queue
}

// Observe registers the observable instruments of s, and starts each
// guard's event series, its calls and its first breaker trip at 0. Call it
// once, at start-up.
func (t *Telemetry) Observe(s State) error {
	var errs []error
	gauge := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, err := t.meter.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := t.meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	state := gauge("orderagg_breaker_state", "", "Circuit breaker state: 0 closed, 1 open, 2 half-open, 3 forced open, 4 forced closed.")
	inUse := gauge("orderagg_bulkhead_in_use", "{call}", "Calls holding a bulkhead slot now.")
	capacity := gauge("orderagg_bulkhead_capacity", "{call}", "Bulkhead size in force (max concurrent calls).")
	timeout := gauge("orderagg_dependency_timeout", "s", "Sub-budget in force for one call, retries included.")
	recommended := gauge("orderagg_dependency_recommended_timeout", "s", "max(3×P99, 2×P99.9) + margin over the rolling window; 0 without latency history.")
	limit := gauge("orderagg_admission_limit", "{request}", "Order-detail requests admitted at once at most, now.")
	inflight := gauge("orderagg_admission_inflight", "{request}", "Order-detail requests holding an admission slot now.")
	reads := counter("orderagg_cache_reads", "{read}", "Last-good store reads by outcome: hit, miss, corrupt, error.")
	writes := counter("orderagg_cache_writes", "{write}", "Last-good store writes by outcome: ok, stale (a newer answer was stored), dropped (queue full), error.")
	queue := gauge("orderagg_cache_write_queue", "{entry}", "Entries waiting for a cache writer now.")
	_, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, g := range s.Guards {
			snap, d := g.Snapshot(), metric.WithAttributes(dependency(g.Name()))
			var rec time.Duration
			if snap.RecommendedTimeout != nil {
				rec = time.Duration(*snap.RecommendedTimeout)
			}
			o.ObserveFloat64(state, float64(snap.Breaker), d) // resilience.State's order is the runbook's
			o.ObserveFloat64(inUse, float64(snap.Bulkhead.InUse), d)
			o.ObserveFloat64(capacity, float64(snap.Bulkhead.Capacity), d)
			o.ObserveFloat64(timeout, time.Duration(snap.Timeout).Seconds(), d)
			o.ObserveFloat64(recommended, rec.Seconds(), d)
		}
		if s.Admission != nil {
			l, n := s.Admission()
			o.ObserveFloat64(limit, float64(l))
			o.ObserveFloat64(inflight, float64(n))
		}
		if s.Cache != nil {
			st := s.Cache()
			for outcome, n := range map[string]uint64{"hit": st.Hits, "miss": st.Misses, "corrupt": st.Corrupt, "error": st.ReadErrors} {
				o.ObserveInt64(reads, int64(n), metric.WithAttributes(attribute.String("outcome", outcome)))
			}
			for outcome, n := range map[string]uint64{"ok": st.WritesOK, "stale": st.WritesStale, "dropped": st.WritesDropped, "error": st.WriteErrors} {
				o.ObserveInt64(writes, int64(n), metric.WithAttributes(attribute.String("outcome", outcome)))
			}
			o.ObserveFloat64(queue, float64(st.Queued))
		}
		return nil
	}, state, inUse, capacity, timeout, recommended, limit, inflight, reads, writes, queue)
	if err := errors.Join(append(errs, err)...); err != nil {
		return fmt.Errorf("telemetry: gauges: %w", err)
	}
	ctx := context.Background()
	for _, g := range s.Guards {
		for _, ev := range knownEvents {
			t.listener.events.Add(ctx, 0, t.listener.attrs(g.Name(), ev, ""))
		}
		for _, r := range knownMissReasons {
			t.listener.events.Add(ctx, 0, t.listener.attrs(g.Name(), "cache_miss", r))
		}
		t.listener.calls.Add(ctx, 0, t.listener.attrs(g.Name(), "", ""))
		t.listener.transitions.Add(ctx, 0, transitionAttrs(g.Name(), resilience.StateClosed, resilience.StateOpen))
	}
	return nil
}

// Listener turns what the guards and the page report into metrics and log
// lines: a fallback at WARN, at most one line per dependency a second, with
// the cause it stands in for; a breaker transition at WARN when it opens or
// is forced, at INFO otherwise; a sub-budget's move at INFO. It is safe for
// concurrent use.
type Listener struct {
	events, calls, transitions, requests, rejected metric.Int64Counter
	attempt, requestDuration                       metric.Float64Histogram
	log                                            *slog.Logger
	fallbacks                                      sync.Map // dependency → *rate.Sometimes
	sets                                           sync.Map // [dependency, event, reason] → metric.MeasurementOption
}

// Listener is this Telemetry's one Listener: give it to every
// resilience.WithListener and to orderdetail.Config.Observer.
func (t *Telemetry) Listener() *Listener { return t.listener }

// OnEvent counts e and logs a fallback.
func (l *Listener) OnEvent(ctx context.Context, e resilience.Event) {
	ev := l.attrs(e.Dependency, e.Name(), "")
	l.events.Add(ctx, 1, ev)
	if e.Fallback {
		l.logFallback(ctx, e)
		return
	}
	if e.Attempt > 0 {
		l.attempt.Record(ctx, e.Duration.Seconds(), ev)
	}
	if e.Attempt <= 1 { // the first attempt, or a call refused before any
		l.calls.Add(ctx, 1, l.attrs(e.Dependency, "", ""))
	}
}

func (l *Listener) logFallback(ctx context.Context, e resilience.Event) {
	limit, ok := l.fallbacks.Load(e.Dependency)
	if !ok { // a limiter is made once per dependency, not per fallback
		limit, _ = l.fallbacks.LoadOrStore(e.Dependency, &rate.Sometimes{Interval: time.Second})
	}
	limit.(*rate.Sometimes).Do(func() {
		attrs := []slog.Attr{slog.String("dependency", e.Dependency), slog.String("event", e.Name())}
		if e.Cause != nil {
			attrs = append(attrs, slog.String("cause", resilience.KindOf(e.Cause).String()), slog.String("error", e.Cause.Error()))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.String("fallback_error", e.Err.Error()))
		}
		l.log.LogAttrs(ctx, slog.LevelWarn, "dependency fallback", attrs...)
	})
}

// OnStateChange counts and logs a breaker transition.
func (l *Listener) OnStateChange(c resilience.StateChange) {
	l.transitions.Add(context.Background(), 1, transitionAttrs(c.Dependency, c.From, c.To))
	level := slog.LevelInfo
	if c.To == resilience.StateOpen || c.To == resilience.StateForcedOpen || c.To == resilience.StateForcedClosed {
		level = slog.LevelWarn
	}
	l.log.LogAttrs(context.Background(), level, "circuit breaker "+c.To.String(), slog.String("dependency", c.Dependency),
		slog.String("from", c.From.String()), slog.String("to", c.To.String()), slog.Time("at", c.At))
}

// OnTimeoutChange logs an adaptive sub-budget's move.
func (l *Listener) OnTimeoutChange(c resilience.TimeoutChange) {
	dir := "up"
	if c.To < c.From {
		dir = "down"
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "adaptive timeout "+dir, slog.String("dependency", c.Dependency),
		slog.Duration("from", c.From), slog.Duration("to", c.To), slog.Duration("recommended", c.Recommended),
		slog.Int64("successes", c.Successes), slog.Time("at", c.At))
}

// CacheLookup counts a last-good lookup for dep, a hit as event cache_hit,
// a miss as cache_miss with its reason, and adds a "cache lookup" event to
// the span in ctx.
func (l *Listener) CacheLookup(ctx context.Context, dep, outcome string) {
	event, reason := "cache_hit", ""
	if outcome != "hit" {
		event, reason = "cache_miss", outcome
	}
	l.events.Add(ctx, 1, l.attrs(dep, event, reason))
	trace.SpanFromContext(ctx).AddEvent("cache lookup",
		trace.WithAttributes(attrSpanDependency.String(dep), attribute.String("orderagg.cache.outcome", outcome)))
}
