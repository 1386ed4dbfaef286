package resilience

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Event is one thing that happened to a dependency: an attempt's outcome,
// a call turned away (Attempt 0), or a fallback's outcome.
type Event struct {
	Dependency string
	Kind       Kind
	Attempt    int  // 1 for the first attempt, 2… for retries
	Probe      bool // a half-open probe
	Fallback   bool // a fallback's outcome: Kind is success or failure
	Start      time.Time
	Duration   time.Duration
	Err        error
	Cause      error // a fallback's: the failed call's error it stands in for
}

// Name is the event's name: the kind's, or fallback_ and the kind's.
func (e Event) Name() string {
	if e.Fallback {
		return "fallback_" + e.Kind.String()
	}
	return e.Kind.String()
}

// Listener hears a guard's events, breaker transitions and adaptive
// sub-budget moves, synchronously on the caller's goroutine, never under
// the guard's locks. It must be quick; it may read the guard (Snapshot) but
// not call through it.
type Listener interface {
	OnEvent(ctx context.Context, e Event)
	OnStateChange(c StateChange)
	OnTimeoutChange(c TimeoutChange)
}

// Clock is a guard's one source of time, the callers' context deadlines
// included; WithDeadline behaves as context.WithDeadline.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
	WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc)
}

// SystemClock is the real clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time                         { return time.Now() }
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (SystemClock) WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, d)
}

// Option configures a Guard at construction.
type Option func(*Guard)

// WithClock sets the guard's clock; the default is SystemClock.
func WithClock(c Clock) Option { return func(g *Guard) { g.clock = c } }

// WithRandom sets the retry jitter's source of uniform values in [0, n);
// the default is math/rand/v2's Int64N.
func WithRandom(f func(n int64) int64) Option { return func(g *Guard) { g.randN = f } }

// WithListener sets the listener of every event and state change.
func WithListener(l Listener) Option { return func(g *Guard) { g.listener = l } }

// WithTracerProvider makes the guard start spans (none without it): a
// call's "dependency <name>", parent of its attempts', with an "attempt"
// event each, and a fallback's "fallback <name>". Both carry
// orderagg.dependency and orderagg.event, and status Error when the caller
// got no answer through the dependency's fault or the guard's refusal. A
// no-op provider (go.opentelemetry.io/otel/trace/noop) is the same as none:
// the guard then does no span work at all.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(g *Guard) {
		if _, off := tp.(noop.TracerProvider); !off {
			g.tracer = tp.Tracer("github.com/orderagg/orderagg/internal/resilience")
		}
	}
}

// Guard protects one dependency with the layers of the package doc, and
// keeps its rolling statistics. Build it once with New and share it.
type Guard struct {
	name     string
	clock    Clock
	randN    func(n int64) int64
	listener Listener
	tracer   trace.Tracer // nil: no spans
	cur      atomic.Pointer[settings]
	inUse    atomic.Int64 // bulkhead slots held, until the guarded function has returned
	capacity atomic.Int64 // bulkhead slots
	breaker  breaker
	timeout  atomic.Int64 // ns: the sub-budget in force
	lookedAt atomic.Int64 // unix ns of an adaptive sub-budget's last look at the window
}

// settings is one configuration and the window it is measured over.
type settings struct {
	cfg    Config
	window *window
}

// New builds the named dependency's guard. cfg's zero fields take their
// defaults; an invalid cfg is an error naming the setting.
func New(name string, cfg Config, opts ...Option) (*Guard, error) {
	g := &Guard{name: name, clock: SystemClock{}, randN: rand.Int64N}
	for _, o := range opts {
		o(g)
	}
	g.breaker.since = g.clock.Now()
	if err := g.Reconfigure(cfg); err != nil {
		return nil, err
	}
	return g, nil
}

// Name is the dependency's name.
func (g *Guard) Name() string { return g.name }

// Reconfigure puts cfg in force atomically; calls in flight finish as they
// started. A new window length or bucket count starts a fresh window; an
// adaptive sub-budget that stays adaptive keeps what it learnt, within the
// new bounds. An invalid cfg changes nothing.
func (g *Guard) Reconfigure(cfg Config) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("resilience: %s: %w", g.name, err)
	}
	next, old := &settings{cfg, newWindow(cfg.Breaker)}, g.cur.Load()
	if old != nil && old.cfg.Breaker.Window == cfg.Breaker.Window && old.cfg.Breaker.Buckets == cfg.Breaker.Buckets {
		next.window = old.window
	}
	g.capacity.Store(int64(cfg.Bulkhead.MaxConcurrent))
	timeout := cfg.Timeout
	if old != nil && old.cfg.AutoTimeout && cfg.AutoTimeout {
		timeout = time.Duration(g.timeout.Load())
	}
	if lo, hi := cfg.autoBounds(); cfg.AutoTimeout {
		timeout = min(max(timeout, lo), hi)
	}
	g.timeout.Store(int64(timeout))
	g.cur.Store(next)
	return nil
}

// ForceBreaker sets or clears the operator's override of the breaker.
func (g *Guard) ForceBreaker(f Force) { g.notify(g.breaker.setForce(f, g.clock.Now())) }

// Do is DoUntil with no bound but ctx's deadline.
func Do[T any](ctx context.Context, g *Guard, fn func(context.Context) (T, error)) (T, error) {
	return DoUntil(ctx, g, time.Time{}, fn)
}

// DoUntil runs fn through g's layers (see the package doc) under the call's
// sub-budget: the dependency's timeout, cut to ctx's deadline and to until
// (zero: none). A cut at ctx's deadline or at until is the caller's,
// KindDeadline, unseen by the breaker; a cut at the timeout is KindTimeout.
// fn must honour its context: DoUntil returns once fn has. A nil error means
// fn's value is good; otherwise the error is an *Error whose Kind says what
// happened, wrapping fn's last error.
func DoUntil[T any](ctx context.Context, g *Guard, until time.Time, fn func(context.Context) (T, error)) (v T, err error) {
	c := &call{g: g, s: g.cur.Load(), start: g.clock.Now()}
	c.ctx, c.span = g.startSpan(ctx, "dependency ")
	defer func() { endSpan(c.span, KindOf(err).String(), err) }()
	c.end = c.start.Add(g.subBudget(c.s, c.start))
	if dl, ok := ctx.Deadline(); ok && !dl.After(c.end) {
		c.end, c.callers = dl, true
	}
	if !until.IsZero() && until.Before(c.end) {
		c.end, c.callers = until, true
	}
	if err := c.admit(); err != nil {
		return v, err
	}
	defer g.inUse.Add(-1)
	cctx, cancel := g.clock.WithDeadline(c.ctx, c.end)
	defer cancel()
	for attempt := 1; ; attempt++ {
		e := Event{Dependency: g.name, Attempt: attempt, Probe: c.probe != 0, Start: g.clock.Now()}
		got, fnErr := fn(cctx)
		e.Duration, e.Err = g.clock.Now().Sub(e.Start), fnErr
		e.Kind = c.classify(cctx, fnErr)
		c.settle(e)
		if e.Kind == KindSuccess {
			return got, nil
		}
		if e.Kind != KindFailure || !c.mayRetry(cctx, attempt) {
			return v, &Error{Dependency: g.name, Kind: e.Kind, Err: fnErr}
		}
	}
}

// call is one guarded call, from its start to its last attempt.
type call struct {
	g       *Guard
	s       *settings
	ctx     context.Context // the caller's, with the call's span
	span    trace.Span
	start   time.Time
	end     time.Time // when the call's time is up
	callers bool      // end is the caller's deadline or bound, not the timeout's
	probe   uint64    // the breaker's ticket: non-zero for a half-open probe
}

// admit passes the call through the budget, the breaker and the bulkhead,
// in that order; a nil error means it holds a slot.
func (c *call) admit() error {
	g, cfg := c.g, &c.s.cfg
	if !c.end.After(c.start) || c.ctx.Err() != nil {
		return c.refuse(KindDeadline, cmp.Or(c.ctx.Err(), context.DeadlineExceeded))
	}
	t, ok, change := g.breaker.allow(c.start, &cfg.Breaker)
	if g.notify(change); !ok {
		return c.refuse(KindShortCircuited, nil)
	}
	c.probe = t
	if !g.acquire() {
		g.breaker.record(t, Event{Kind: KindDeadline, Start: c.start}, c.s.window, &cfg.Breaker) // a probe that never ran gives its place back
		return c.refuse(KindRejected, nil)
	}
	return nil
}

// acquire takes a bulkhead slot, if one is free.
func (g *Guard) acquire() bool {
	for {
		n := g.inUse.Load()
		if n >= g.capacity.Load() {
			return false
		}
		if g.inUse.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// refuse reports a call that never reached the dependency.
func (c *call) refuse(kind Kind, cause error) error {
	if kind != KindDeadline {
		c.s.window.add(c.start, counter(kind))
	}
	c.g.tell(c.ctx, Event{Dependency: c.g.name, Kind: kind, Start: c.start, Err: cause})
	return &Error{Dependency: c.g.name, Kind: kind, Err: cause}
}

// classify turns fn's result into a kind by whose time ran out: the
// timeout's is KindTimeout, the caller's (or its going away) KindDeadline.
func (c *call) classify(ctx context.Context, err error) Kind {
	cut := ctx.Err() != nil
	callers := c.ctx.Err() != nil || (cut && c.callers)
	switch {
	case err == nil && cut && !callers:
		return KindTimeout // an answer after the budget: the caller could not have waited for it
	case err == nil:
		return KindSuccess
	case callers:
		return KindDeadline
	case cut || KindOf(err) == KindDeadline: // fn's own deadline, e.g. a client timeout
		return KindTimeout
	}
	return KindOf(err)
}

// settle records an attempt in the window (unless the caller cut it), the
// breaker, the listener and the call's span.
func (c *call) settle(e Event) {
	g := c.g
	if e.Kind != KindDeadline {
		c.s.window.record(e)
	}
	g.notify(g.breaker.record(c.probe, e, c.s.window, &c.s.cfg.Breaker))
	g.tell(c.ctx, e)
	if c.span.IsRecording() {
		c.span.AddEvent("attempt", trace.WithAttributes(attribute.Int("orderagg.attempt", e.Attempt),
			attrEvent.String(e.Name()), attribute.Bool("orderagg.probe", e.Probe)))
	}
}

// mayRetry reports, having waited the backoff, whether to retry a failure
// of the attempt made: not a probe, attempts left, the breaker closed, and
// time left for the backoff and a typical (P50) attempt.
func (c *call) mayRetry(cctx context.Context, made int) bool {
	g, r := c.g, &c.s.cfg.Retry
	if st := g.breaker.reported(); c.probe != 0 || made >= r.MaxAttempts || (st != StateClosed && st != StateForcedClosed) {
		return false
	}
	wait := min(r.Backoff<<(made-1), r.MaxBackoff) // doubled per retry made, then drawn from (0, wait]
	if wait > 0 {
		wait = time.Duration(g.randN(int64(wait)) + 1)
	}
	now := g.clock.Now()
	if c.end.Sub(now) < wait+time.Duration(c.s.window.latencies(now, false).P50) {
		return false
	}
	select {
	case <-g.clock.After(wait):
		return true
	case <-cctx.Done():
		return false
	}
}

// Fallback runs fb after a guarded call failed with cause, bounded by the
// guard's FallbackTimeout and ctx's deadline, and reports fallback_success
// or fallback_failure. fb gets the cause, to choose by its kind; it must
// not call the dependency that failed.
func Fallback[T any](ctx context.Context, g *Guard, cause error, fb func(context.Context, error) (T, error)) (T, error) {
	s := g.cur.Load()
	ctx, span := g.startSpan(ctx, "fallback ")
	start := g.clock.Now()
	fctx, cancel := g.clock.WithDeadline(ctx, start.Add(s.cfg.FallbackTimeout))
	v, err := fb(fctx, cause)
	cancel()
	e := Event{Dependency: g.name, Kind: KindSuccess, Fallback: true, Start: start, Duration: g.clock.Now().Sub(start), Err: err, Cause: cause}
	if err != nil {
		e.Kind = KindFailure
	}
	s.window.add(start.Add(e.Duration), cFallbackSuccess+counter(e.Kind))
	g.tell(ctx, e)
	endSpan(span, e.Name(), err)
	return v, err
}

// RecordCacheLookup counts a last-good lookup made for this dependency's
// fallback: cache_hit or cache_miss in the window.
func (g *Guard) RecordCacheLookup(hit bool) {
	n := cCacheMiss
	if hit {
		n = cCacheHit
	}
	g.cur.Load().window.add(g.clock.Now(), n)
}

func (g *Guard) tell(ctx context.Context, e Event) {
	if g.listener != nil {
		g.listener.OnEvent(ctx, e)
	}
}

func (g *Guard) notify(c *StateChange) {
	if c != nil && g.listener != nil {
		c.Dependency = g.name
		g.listener.OnStateChange(*c)
	}
}

var (
	attrEvent = attribute.Key("orderagg.event")
	noSpan    = trace.SpanFromContext(context.Background())
)

func (g *Guard) startSpan(ctx context.Context, prefix string) (context.Context, trace.Span) {
	if g.tracer == nil {
		return ctx, noSpan
	}
	return g.tracer.Start(ctx, prefix+g.name, trace.WithAttributes(attribute.String("orderagg.dependency", g.name)))
}

func endSpan(span trace.Span, event string, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrEvent.String(event))
		switch event {
		case "failure", "timeout", "short_circuited", "rejected", "fallback_failure":
			span.RecordError(err)
			span.SetStatus(codes.Error, event)
		}
	}
	span.End()
}
