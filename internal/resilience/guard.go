package resilience

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Event is one thing that happened to a dependency: a physical attempt's
// outcome, a call turned away (rejected, short-circuited, no budget), or a
// fallback's outcome. Listeners get every event, so metrics and traces can
// count each kind on its own.
type Event struct {
	Dependency string
	Kind       Kind
	// Attempt is 1 for the first attempt, 2… for retries; 0 when no attempt
	// was made (rejected, short-circuited, no budget) and for fallbacks.
	Attempt  int
	Hedge    bool // a hedged (backup) attempt
	Probe    bool // a half-open probe
	Fallback bool // the outcome of a fallback: Kind is success or failure
	Start    time.Time
	Duration time.Duration
	Err      error
}

// Name is the event's metric name: the kind's, or fallback_success /
// fallback_failure for fallbacks.
func (e Event) Name() string {
	if e.Fallback {
		if e.Kind == KindSuccess {
			return "fallback_success"
		}
		return "fallback_failure"
	}
	return e.Kind.String()
}

// Listener receives a guard's events. Methods are called synchronously on the
// caller's goroutine, never under a lock; they must be quick and must not
// call back into the guard.
type Listener interface {
	OnEvent(ctx context.Context, e Event)
	OnStateChange(c StateChange)
}

// Option configures a Guard at construction.
type Option func(*Guard)

// WithClock injects a clock (tests).
func WithClock(c Clock) Option { return func(g *Guard) { g.clock = c } }

// WithRandom injects the source of retry jitter (tests): it returns a
// uniform value in [0, n). The default is math/rand/v2's Int64N.
func WithRandom(f func(n int64) int64) Option { return func(g *Guard) { g.randN = f } }

// WithListener sets the listener told of every event and state change.
func WithListener(l Listener) Option { return func(g *Guard) { g.listener = l } }

// WithCeiling bounds an adaptive sub-budget (Config.AutoTimeout) by the
// most a caller can ever give the call: the page's deadline minus its
// reserve. Every call is cut to its caller's deadline anyway; the ceiling
// keeps the learnt value, and what /v1/resilience shows, within reach.
// 0 (the default) means no bound beyond timeout_max.
func WithCeiling(d time.Duration) Option { return func(g *Guard) { g.ceiling = d } }

// settings is one immutable configuration with the window it is measured
// over. Reconfigure swaps the pointer; a call reads it once and keeps it.
type settings struct {
	cfg    Config
	window *window
	slow   time.Duration
}

// Guard protects one dependency: bulkhead, breaker, sub-budget, retries and
// hedges, with latency statistics over a rolling window. Build it once with
// New and share it; it is safe for concurrent use.
type Guard struct {
	name      string
	clock     Clock
	realClock bool // clock is SystemClock: one time.Now serves both uses
	listener  Listener
	randN     func(n int64) int64
	ceiling   time.Duration // see WithCeiling
	cur       atomic.Pointer[settings]
	bulkhead  bulkhead
	breaker   breaker

	// The hedge delay and the typical attempt latency are read on every
	// call; recomputing them from the histogram each time would cost more
	// than the call, so they are refreshed at most every refreshEvery.
	// Calls turned away for want of a slot or a closed breaker share one
	// error each: the hot path of an overload allocates nothing.
	errRejected, errShortCircuited *Error

	statsMu   sync.Mutex
	statsAt   atomic.Int64 // unix nanos of the last refresh
	typical   atomic.Int64 // P50 attempt latency, ns
	hedgeWait atomic.Int64 // observed latency at the hedge percentile, ns

	// The adaptive sub-budget (Config.AutoTimeout), see adapt.
	autoMu sync.Mutex
	autoTO atomic.Int64 // ns
	autoAt atomic.Int64 // unix nanos of the last look
}

const refreshEvery = 100 * time.Millisecond

// New builds a guard for the named dependency. cfg's zero fields take their
// defaults; an invalid cfg is an error naming the setting.
func New(name string, cfg Config, opts ...Option) (*Guard, error) {
	g := &Guard{name: name, clock: SystemClock{}, randN: rand.Int64N}
	for _, o := range opts {
		o(g)
	}
	_, g.realClock = g.clock.(SystemClock)
	g.errRejected = &Error{Dependency: name, Kind: KindRejected}
	g.errShortCircuited = &Error{Dependency: name, Kind: KindShortCircuited}
	if err := g.Reconfigure(cfg); err != nil {
		return nil, err
	}
	g.breaker.closedSince = g.clock.Now()
	return g, nil
}

// Name is the dependency's name.
func (g *Guard) Name() string { return g.name }

// Config returns the settings in force, defaults filled in.
func (g *Guard) Config() Config { return g.cur.Load().cfg }

// Reconfigure swaps the settings atomically; calls in flight finish under
// the settings they started with. A change of the breaker's window length or
// bucket count starts a fresh window (its history is measured in the old
// geometry); anything else keeps the history. An invalid cfg changes nothing.
func (g *Guard) Reconfigure(cfg Config) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("resilience: %s: %w", g.name, err)
	}
	s := &settings{cfg: cfg}
	s.slow = s.cfg.slowCallDuration()
	old := g.cur.Load()
	if old != nil && old.cfg.Breaker.Window == cfg.Breaker.Window && old.cfg.Breaker.Buckets == cfg.Breaker.Buckets {
		s.window = old.window
	} else {
		s.window = newWindow(cfg.Breaker.Window, cfg.Breaker.Buckets)
	}
	g.bulkhead.capacity.Store(int64(cfg.Bulkhead.MaxConcurrent))
	if cfg.AutoTimeout {
		// Turning it on starts from the configured timeout; a change of
		// bounds keeps the value learnt so far, brought within them.
		from := time.Duration(g.autoTO.Load())
		if old == nil || !old.cfg.AutoTimeout {
			from = cfg.Timeout
		}
		lo, hi := g.autoBounds(&cfg)
		g.autoTO.Store(int64(min(max(from, lo), hi)))
	}
	g.cur.Store(s)
	return nil
}

// ForceBreaker sets or clears the operator override of the breaker.
func (g *Guard) ForceBreaker(f Force) {
	g.notifyState(g.breaker.setForce(f, g.clock.Now()))
}

// Do runs fn under g: breaker check, bulkhead slot, then attempts within the
// sub-budget (the dependency's timeout clamped to ctx's deadline), retried or
// hedged as configured. fn must honour its context: the guard cancels it when
// the budget runs out and returns once fn has returned.
//
// A nil error means fn's value is good. Otherwise the error is an *Error
// whose Kind says what happened; it wraps fn's last error.
func Do[T any](ctx context.Context, g *Guard, fn func(context.Context) (T, error)) (T, error) {
	return DoUntil(ctx, g, time.Time{}, fn)
}

// DoUntil is Do for a call that must also end by until (zero: no such
// bound), earlier than ctx's deadline: the caller keeps the rest of its time
// for itself. The call's context carries the nearer of the sub-budget's end
// and until as its deadline. A call cut at until is the caller's doing
// (KindDeadline), like one cut at ctx's deadline, and teaches the breaker
// nothing.
//
// It spares the caller a context of its own for the bound: a context with a
// deadline is a runtime timer, a cost well beyond its allocation under load
// (docs/experiments.md, "floor"). The guard arms a timer for the call's
// sub-budget anyway, and the bound rides on it.
func DoUntil[T any](ctx context.Context, g *Guard, until time.Time, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	s := g.cur.Load()
	cfg := &s.cfg
	// Deadlines are real time even when a test injects a clock; the clock
	// drives statistics, the breaker and timers.
	realStart := time.Now()
	start := realStart
	if !g.realClock {
		start = g.clock.Now()
	}

	// Budget first: a call with no time left should not take a slot or a
	// probe only to be cancelled.
	budget, clamped, boundCause := g.budget(ctx, s, until, realStart, start)
	if budget <= 0 || ctx.Err() != nil {
		cause := ctx.Err()
		if cause == nil {
			cause = context.DeadlineExceeded // until has passed
		}
		return zero, g.refuse(ctx, s, start, KindDeadline, cause)
	}

	t, ok, change := g.breaker.allow(start, &cfg.Breaker)
	g.notifyState(change)
	if !ok {
		return zero, g.refuse(ctx, s, start, KindShortCircuited, nil)
	}

	// The common case takes a free slot at once; only a call that has to
	// queue goes through acquire, and then its attempt reads the clock anew.
	queued := false
	if !g.bulkhead.tryAcquire() {
		kind, ok := g.bulkhead.acquire(ctx, &cfg.Bulkhead, g.maxWait(cfg, budget), g.clock)
		if !ok {
			if t.probe {
				g.notifyState(g.breaker.onProbeDone(t, false, true, start, &cfg.Breaker))
			}
			return zero, g.refuse(ctx, s, start, kind, ctx.Err())
		}
		queued = true
	}
	defer g.bulkhead.release()
	// The sub-budget's clock starts at admission: time spent queued counts.
	// When the caller's deadline is the tighter one, its context already
	// carries it and deriving another would only cost a timer.
	cctx := ctx
	if !clamped {
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadlineCause(ctx, realStart.Add(budget), boundCause)
		defer cancel()
	}

	// The first attempt starts now: Do's reading of the clock serves unless
	// the call queued for its slot.
	first := start
	if queued {
		first = time.Time{}
	}
	r, n := runAttempts(ctx, cctx, g, s, t, first, fn)
	if r.kind == KindSuccess {
		return r.v, nil
	}
	return zero, &Error{Dependency: g.name, Kind: r.kind, Attempts: n, Err: r.err}
}

// budget is a call's time: the sub-budget in force, cut to the caller's
// bound, the nearer of until and ctx's deadline. clamped: ctx's deadline
// bounds the call, so its context serves as the call's. boundCause is set
// when until bounds it: the call's own context then ends with that cause,
// so the cut reads as the caller's (classify).
func (g *Guard) budget(ctx context.Context, s *settings, until, realStart, start time.Time) (budget time.Duration, clamped bool, boundCause error) {
	budget = s.cfg.Timeout
	if s.cfg.AutoTimeout {
		g.adapt(s, start)
		budget = time.Duration(g.autoTO.Load())
	}
	bound, viaCtx := until, false
	if dl, ok := ctx.Deadline(); ok && (until.IsZero() || dl.Before(until)) {
		bound, viaCtx = dl, true
	}
	if bound.IsZero() {
		return budget, false, nil
	}
	if left := bound.Sub(realStart); left <= budget {
		budget, clamped = left, viaCtx
		if !viaCtx {
			boundCause = errCallerBound
		}
	}
	return budget, clamped, boundCause
}

// runAttempts makes the attempts of an admitted call — hedged, or one at a
// time — retrying while they fail and the retry policy allows, and returns
// the last result and how many attempts were made. first is when the first
// plain attempt starts, or zero to read the clock then.
func runAttempts[T any](ctx, cctx context.Context, g *Guard, s *settings, t ticket, first time.Time, fn func(context.Context) (T, error)) (attemptResult[T], int) {
	cfg := &s.cfg
	maxAttempts := cfg.Retry.MaxAttempts
	if t.probe {
		maxAttempts = 1 // a probe asks one question
	}
	var (
		r attemptResult[T]
		n int
	)
	for {
		if cfg.Hedge.Enabled && !t.probe {
			r, n = hedged(ctx, cctx, g, s, n, fn)
		} else {
			n++
			at := time.Time{}
			if n == 1 {
				at = first
			}
			r = attempt(ctx, cctx, g, s, n, false, t, at, fn)
		}
		if r.kind != KindFailure || n >= maxAttempts || !g.mayRetry(cctx, s, n) {
			return r, n
		}
	}
}

// attempt makes one physical call and records it.
// start is the clock's reading as the attempt begins, or zero to read it here.
func attempt[T any](ctx, cctx context.Context, g *Guard, s *settings, n int, hedge bool, t ticket, start time.Time, fn func(context.Context) (T, error)) attemptResult[T] {
	if start.IsZero() {
		start = g.clock.Now()
	}
	v, err := fn(cctx)
	end := g.now(start)
	kind := classify(ctx, cctx, err)
	g.settle(ctx, s, n, hedge, t, kind, start, end, err)
	return attemptResult[T]{v, err, kind}
}

// settle records a finished attempt, feeds the breaker and tells the
// listener. The detection simulation (sim_test.go) calls it directly.
func (g *Guard) settle(ctx context.Context, s *settings, n int, hedge bool, t ticket, kind Kind, start, end time.Time, err error) {
	lat := end.Sub(start)
	// A call cut short by the caller tells us nothing about the dependency.
	if kind != KindDeadline {
		slow := lat >= g.slowAfter(s)
		s.window.record(end, kindCounter(kind), slow, lat)
		if n > 1 {
			s.window.add(end, cRetry)
		}
		if hedge {
			s.window.add(end, cHedge)
		}
		bad := kind == KindFailure || kind == KindTimeout
		good := kind == KindSuccess || kind == KindBadRequest // the dependency answered
		if t.probe {
			g.notifyState(g.breaker.onProbeDone(t, good, false, end, &s.cfg.Breaker))
		} else if tripped := g.breaker.onResult(bad, good, &s.cfg.Breaker); (bad || slow) && Force(g.breaker.force.Load()) == ForceNone {
			g.notifyState(g.breaker.evaluate(s.window, end, &s.cfg.Breaker, tripped))
		}
	} else if t.probe {
		g.notifyState(g.breaker.onProbeDone(t, false, true, end, &s.cfg.Breaker))
	}
	if g.listener != nil {
		g.listener.OnEvent(ctx, Event{Dependency: g.name, Kind: kind, Attempt: n, Hedge: hedge, Probe: t.probe, Start: start, Duration: lat, Err: err})
	}
}

// classify turns fn's result into a kind. Whose clock ran out matters: the
// sub-budget expiring is the dependency's timeout; the caller's deadline or
// cancellation is not the dependency's fault.
func classify(ctx, cctx context.Context, err error) Kind {
	cut := cctx.Err() != nil
	if cut && context.Cause(cctx) == errHedgeLost {
		return KindDeadline // the other attempt answered first
	}
	if err == nil {
		if cut && !callerCut(ctx, cctx) {
			// An answer that arrived after the budget is a timeout: the
			// caller could not have waited for it.
			return KindTimeout
		}
		return KindSuccess
	}
	if callerCut(ctx, cctx) {
		return KindDeadline
	}
	if cut {
		return KindTimeout
	}
	k := KindOf(err)
	if k == KindDeadline {
		// fn reported a context error of its own making (e.g. its own
		// client timeout): the dependency was too slow.
		return KindTimeout
	}
	return k
}

// callerCut reports whether the caller's own time ran out: its context
// ended, or the call was cut at DoUntil's bound.
func callerCut(ctx, cctx context.Context) bool {
	return ctx.Err() != nil || (cctx.Err() != nil && context.Cause(cctx) == errCallerBound)
}

// mayRetry reports whether another attempt is worth making after the
// attempts made so far: the breaker is not open, the retry budget over the
// window has room, and the remaining sub-budget can hold the backoff plus a
// typical attempt. It waits the backoff.
func (g *Guard) mayRetry(cctx context.Context, s *settings, made int) bool {
	if st := g.breaker.reported(); st != StateClosed && st != StateForcedClosed {
		return false
	}
	now := g.clock.Now()
	if !g.retryBudgetLeft(s, now) {
		return false
	}
	backoff := g.backoff(&s.cfg.Retry, made)
	if backoff > 0 {
		backoff = time.Duration(g.randN(int64(backoff)) + 1) // full jitter: (0, backoff]
	}
	if dl, ok := cctx.Deadline(); ok && time.Until(dl) < backoff+g.typicalLatency(s, now) {
		return false
	}
	if backoff <= 0 {
		return true
	}
	t := g.clock.NewTimer(backoff)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-cctx.Done():
		return false
	}
}

// backoff is the ceiling of the wait before the retry that follows attempt
// made: Backoff, doubled for each retry before it, capped at MaxBackoff.
func (g *Guard) backoff(r *RetryConfig, made int) time.Duration {
	d := r.Backoff
	for i := 1; i < made && d < r.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.MaxBackoff)
}

// retryBudgetLeft: retries and hedges in the window stay under BudgetPercent
// of calls, with BudgetMin always allowed. This is what keeps an outage from
// multiplying the load on a sick dependency.
func (g *Guard) retryBudgetLeft(s *settings, now time.Time) bool {
	c := s.window.counts(now, time.Time{})
	extra := c[cRetry] + c[cHedge]
	calls := c[cSuccess] + c[cFailure] + c[cTimeout] + c[cBadRequest] - extra
	allowed := int64(float64(calls)*s.cfg.Retry.BudgetPercent/100) + int64(s.cfg.Retry.BudgetMin)
	return extra < allowed
}

func (g *Guard) refreshStats(s *settings, now time.Time) {
	if now.UnixNano()-g.statsAt.Load() < int64(refreshEvery) {
		return
	}
	if !g.statsMu.TryLock() {
		return // someone else is refreshing; their figures will do
	}
	defer g.statsMu.Unlock()
	h := s.window.histogram(now, false)
	g.typical.Store(int64(h.quantile(0.5)))
	g.hedgeWait.Store(int64(h.quantile(s.cfg.Hedge.Percentile / 100)))
	g.statsAt.Store(now.UnixNano())
}

func (g *Guard) typicalLatency(s *settings, now time.Time) time.Duration {
	g.refreshStats(s, now)
	return time.Duration(g.typical.Load())
}

func (g *Guard) hedgeDelay(s *settings, now time.Time) time.Duration {
	g.refreshStats(s, now)
	return max(time.Duration(g.hedgeWait.Load()), s.cfg.Hedge.MinDelay)
}

// now reads the clock after since. With the real clock only the monotonic
// clock is read (time.Since), which costs half of a time.Now on some
// virtual machines; the wall time is derived from since.
func (g *Guard) now(since time.Time) time.Time {
	if g.realClock {
		return since.Add(time.Since(since))
	}
	return g.clock.Now()
}

// timeout is the sub-budget in force: the adaptive one when it is on.
func (g *Guard) timeout(s *settings) time.Duration {
	if s.cfg.AutoTimeout {
		return time.Duration(g.autoTO.Load())
	}
	return s.cfg.Timeout
}

// slowAfter is the slow-call threshold in force. Its default, 80 % of the
// sub-budget, follows an adaptive sub-budget: measured against the timeout
// it started from, a dependency that drifted slower (and was followed)
// would count every call slow and trip the breaker on slowness alone.
func (g *Guard) slowAfter(s *settings) time.Duration {
	if s.cfg.AutoTimeout && s.cfg.Breaker.SlowCallDuration == 0 {
		return time.Duration(g.autoTO.Load()) * 8 / 10
	}
	return s.slow
}

// autoBounds are the limits of an adaptive sub-budget: timeout_min and
// timeout_max, the ceiling (WithCeiling) lowering both if need be.
func (g *Guard) autoBounds(cfg *Config) (lo, hi time.Duration) {
	lo, hi = cfg.TimeoutMin, cfg.timeoutMax()
	if g.ceiling > 0 {
		lo, hi = min(lo, g.ceiling), min(hi, g.ceiling)
	}
	return lo, hi
}

// maxWait is how long a call may queue for a slot.
func (g *Guard) maxWait(cfg *Config, budget time.Duration) time.Duration {
	if cfg.Bulkhead.MaxWait > 0 && cfg.Bulkhead.MaxWait < budget {
		return cfg.Bulkhead.MaxWait
	}
	return budget
}

// refuse records and reports a call that never reached the dependency.
func (g *Guard) refuse(ctx context.Context, s *settings, now time.Time, kind Kind, cause error) error {
	if kind != KindDeadline {
		s.window.add(now, kindCounter(kind))
	}
	if g.listener != nil {
		g.listener.OnEvent(ctx, Event{Dependency: g.name, Kind: kind, Start: now, Err: cause})
	}
	switch {
	case cause == nil && kind == KindRejected:
		return g.errRejected
	case cause == nil && kind == KindShortCircuited:
		return g.errShortCircuited
	}
	return &Error{Dependency: g.name, Kind: kind, Err: cause}
}

func (g *Guard) notifyState(c *StateChange) {
	if c == nil || g.listener == nil {
		return
	}
	c.Dependency = g.name
	g.listener.OnStateChange(*c)
}

// errHedgeLost is the cause given to the losing attempt of a hedge.
var errHedgeLost = errors.New("resilience: hedge lost")

// errCallerBound is the cause of a call cut at DoUntil's bound.
var errCallerBound = fmt.Errorf("resilience: the caller's bound: %w", context.DeadlineExceeded)
