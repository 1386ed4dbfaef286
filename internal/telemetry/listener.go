package telemetry

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Span attributes this package sets (the guards set orderagg.dependency
// and orderagg.event on their own spans).
const (
	attrSpanDependency = attribute.Key("orderagg.dependency")
	attrSpanOutcome    = attribute.Key("orderagg.cache.outcome")
	attrSpanDegraded   = attribute.Key("orderagg.degraded")
	attrSpanRequestID  = attribute.Key("orderagg.request_id")
	attrSpanEntries    = attribute.Key("orderagg.cache.entries")
)

// Listener returns the resilience.Listener to give every guard (one is
// enough for all of them). It counts each event in
// orderagg_dependency_events_total{dependency,event}, a physical attempt's
// duration in orderagg_dependency_attempt_duration_seconds, a logical call,
// a retry or a hedge in their own counters, and a breaker transition or an
// adaptive sub-budget's move in theirs. It logs each fallback at WARN, at
// most one line per dependency per Config.LogInterval, the next line
// carrying how many were suppressed and naming the latest failed event of
// that dependency as the cause; a breaker transition at WARN when it opens
// or is forced and INFO otherwise; a sub-budget's move at INFO. logger nil
// means Config.Logger.
func (t *Telemetry) Listener(logger *slog.Logger) resilience.Listener {
	if logger == nil {
		logger = t.cfg.Logger
	}
	return &listener{t: t, log: logger, logs: map[string]*fallbackLog{}}
}

var (
	_ resilience.Listener        = (*listener)(nil)
	_ resilience.TimeoutListener = (*listener)(nil)
	_ orderdetail.Observer       = observer{}
)

type listener struct {
	t   *Telemetry
	log *slog.Logger

	mu   sync.Mutex
	logs map[string]*fallbackLog // by dependency
}

// fallbackLog is one dependency's fallback log state.
type fallbackLog struct {
	lim      *limiter
	cause    string // the latest failed event, e.g. "timeout"
	causeErr error
}

// fallbackLog returns dep's log state; l.mu held.
func (l *listener) fallbackLog(dep string) *fallbackLog {
	f := l.logs[dep]
	if f == nil {
		f = &fallbackLog{lim: newLimiter(l.t.cfg.Now, l.t.cfg.LogInterval)}
		l.logs[dep] = f
	}
	return f
}

func (l *listener) OnEvent(ctx context.Context, e resilience.Event) {
	in := &l.t.inst
	dep := with(dependency(e.Dependency))
	ev := with(dependency(e.Dependency), attribute.String(attrEvent, e.Name()))
	in.events.Add(ctx, 1, ev)
	switch {
	case e.Fallback:
		l.logFallback(ctx, e)
		return
	case e.Attempt == 0:
		in.calls.Add(ctx, 1, dep) // refused: a call that never reached the dependency
	default:
		in.attempt.Record(ctx, e.Duration.Seconds(), ev)
		switch {
		case e.Hedge:
			in.hedges.Add(ctx, 1, dep)
		case e.Attempt == 1:
			in.calls.Add(ctx, 1, dep)
		default:
			in.retries.Add(ctx, 1, dep)
		}
	}
	if isCause(ctx, e) {
		l.mu.Lock()
		f := l.fallbackLog(e.Dependency)
		f.cause, f.causeErr = e.Name(), e.Err
		l.mu.Unlock()
	}
}

// isCause reports whether e may be why a fallback follows: the dependency
// failed, was too slow or was not called. A deadline counts only when the
// caller's context really ended; otherwise it is a hedge's losing attempt.
func isCause(ctx context.Context, e resilience.Event) bool {
	switch e.Kind {
	case resilience.KindFailure, resilience.KindTimeout, resilience.KindShortCircuited, resilience.KindRejected:
		return true
	case resilience.KindDeadline:
		return ctx.Err() != nil || e.Attempt == 0
	}
	return false
}

func (l *listener) logFallback(ctx context.Context, e resilience.Event) {
	l.mu.Lock()
	f := l.fallbackLog(e.Dependency)
	ok, suppressed := f.lim.allow()
	cause, causeErr := f.cause, f.causeErr
	l.mu.Unlock()
	if !ok {
		return
	}
	attrs := []slog.Attr{slog.String("dependency", e.Dependency), slog.String("event", e.Name())}
	if cause != "" {
		attrs = append(attrs, slog.String("cause", cause))
	}
	if causeErr != nil {
		attrs = append(attrs, slog.String("error", causeErr.Error()))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("fallback_error", e.Err.Error()))
	}
	attrs = append(attrs, slog.Int64("suppressed", suppressed))
	l.log.LogAttrs(ctx, slog.LevelWarn, "dependency fallback", attrs...)
}

func (l *listener) OnStateChange(c resilience.StateChange) {
	ctx := context.Background()
	l.t.inst.transitions.Add(ctx, 1, transitionAttrs(c))
	level := slog.LevelInfo
	switch c.To {
	case resilience.StateOpen, resilience.StateForcedOpen, resilience.StateForcedClosed:
		level = slog.LevelWarn
	}
	l.log.LogAttrs(ctx, level, "circuit breaker "+c.To.String(), slog.String("dependency", c.Dependency),
		slog.String("from", c.From.String()), slog.String("to", c.To.String()), slog.Time("at", c.At))
}

func transitionAttrs(c resilience.StateChange) metric.MeasurementOption {
	return with(dependency(c.Dependency), attribute.String("from", c.From.String()), attribute.String("to", c.To.String()))
}

// OnTimeoutChange counts an adaptive sub-budget's move in
// orderagg_dependency_timeout_changes_total and logs it at INFO; the guard
// moves it at most once a second, so the log needs no limiter.
func (l *listener) OnTimeoutChange(c resilience.TimeoutChange) {
	ctx := context.Background()
	dir := "up"
	if c.To < c.From {
		dir = "down"
	}
	l.t.inst.timeoutChanges.Add(ctx, 1, with(dependency(c.Dependency), attribute.String("direction", dir)))
	l.log.LogAttrs(ctx, slog.LevelInfo, "adaptive timeout "+dir, slog.String("dependency", c.Dependency),
		slog.Duration("from", c.From), slog.Duration("to", c.To), slog.Duration("recommended", c.Recommended),
		slog.Int64("successes", c.Successes), slog.Time("at", c.At))
}

// Observer returns the orderdetail.Observer that counts last-good lookups
// by the dependency whose answer was looked up: a hit as
// orderagg_dependency_events_total{event="cache_hit"}, a miss as
// {event="cache_miss", reason=absent|stale|corrupt|error}. The lookup is
// also a "cache lookup" event on the span in ctx (the fallback's).
func (t *Telemetry) Observer() orderdetail.Observer { return observer{t} }

type observer struct{ t *Telemetry }

func (o observer) CacheLookup(ctx context.Context, dep, outcome string) {
	attrs := with(dependency(dep), attribute.String(attrEvent, EventCacheHit))
	if outcome != "hit" {
		attrs = with(dependency(dep), attribute.String(attrEvent, EventCacheMiss), attribute.String(attrReason, outcome))
	}
	o.t.inst.events.Add(ctx, 1, attrs)
	trace.SpanFromContext(ctx).AddEvent("cache lookup", trace.WithAttributes(attrSpanDependency.String(dep), attrSpanOutcome.String(outcome)))
}

// limiter lets one thing through per interval and counts what it held back.
type limiter struct {
	now        func() time.Time
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	started    bool
	suppressed int64
}

func newLimiter(now func() time.Time, every time.Duration) *limiter {
	return &limiter{now: now, every: every}
}

// allow reports whether to go ahead and, if so, how many were held back
// since it last did.
func (l *limiter) allow() (bool, int64) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started && now.Sub(l.last) < l.every {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.started, l.last, l.suppressed = true, now, 0
	return true, n
}
