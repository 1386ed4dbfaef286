package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/orderagg/orderagg/internal/resilience"
)

// A guard tells its listener about an attempt only once the attempt is over,
// but the attempt's HTTP client span and Redis command span are made while
// it runs and need their parent then. So, while a traced request runs, its
// dependency, attempt and fallback spans are started live by whoever sees
// the work first — the HTTP transport (WrapTransport), the Redis hook, or the
// listener for a call that never started — and kept here, by name, until the
// listener hears the outcome and ends them with it. Whatever is still open
// when the request ends is ended by the middleware.
//
// The spans are found by dependency name: the aggregator makes one call and
// at most one fallback per dependency per request. Outside a traced request
// (no reqTrace in the context) the listener records after-the-fact spans
// under the span in the event's context instead.
type reqTrace struct {
	t   *Telemetry
	ctx context.Context // holds the server span

	mu    sync.Mutex
	spans map[string]*liveSpan // by span key: "dependency order", "fallback order", "cache order"
	// refused holds the cache guard's refusals until the lookup they belong
	// to names its dependency (Observer.CacheLookup), by the Done channel of
	// the fallback's context, which the refusal and the lookup share.
	refused map[<-chan struct{}]resilience.Event
	// ended: the request has ended, and with it the table. Work that
	// outlives it (nothing in orderagg should) is traced as if outside a
	// request rather than left in spans nobody would end.
	ended bool
}

// liveSpan is a span kept open until its outcome is known.
type liveSpan struct {
	ctx      context.Context // holds span, parent of its children
	span     trace.Span
	end      time.Time // latest end seen among its events; zero: end now
	event    string    // the last event's name
	failed   bool      // the last event is an error of the dependency
	attempts []attempt // started live, not yet reported by the guard
	done     bool
}

type attempt struct {
	span  trace.Span
	start time.Time
}

// depAttrs are the span names and attribute of one dependency.
type depAttrs struct {
	name         string
	spanName     string // "dependency inventory"
	fallbackName string // "fallback inventory"
	spanDep      attribute.KeyValue
}

func depInfo(dep string) *depAttrs {
	return &depAttrs{name: dep, spanName: "dependency " + dep, fallbackName: "fallback " + dep, spanDep: attrSpanDependency.String(dep)}
}

type reqTraceKey struct{}

func reqTraceFrom(ctx context.Context) *reqTrace {
	rt, _ := ctx.Value(reqTraceKey{}).(*reqTrace)
	return rt
}

func (t *Telemetry) newReqTrace(ctx context.Context) (context.Context, *reqTrace) {
	rt := &reqTrace{t: t, spans: make(map[string]*liveSpan, 4)}
	ctx = context.WithValue(ctx, reqTraceKey{}, rt)
	rt.ctx = ctx
	return ctx, rt
}

// open returns the span kept under key, starting it as name under parent
// (the server span when nil) at start (now when zero) if it is not open yet.
// rt.mu held.
func (rt *reqTrace) open(key, name string, parent *liveSpan, d *depAttrs, start time.Time) *liveSpan {
	if s, ok := rt.spans[key]; ok && !s.done {
		return s
	}
	pctx := rt.ctx
	if parent != nil {
		pctx = parent.ctx
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(d.spanDep)}
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	ctx, sp := rt.t.tracer.Start(pctx, name, opts...)
	s := &liveSpan{ctx: ctx, span: sp}
	rt.spans[key] = s
	return s
}

// cacheDependency is the guard name of the last-good reads (config.NameCache).
const cacheDependency = "cache"

func cacheKey(dep string) string { return "cache " + dep }

// startAttempt opens dep's dependency span if need be and starts an attempt
// span under it; ctx gets the attempt span, so the HTTP client span is its
// child.
func (rt *reqTrace) startAttempt(ctx context.Context, dep string) context.Context {
	d := depInfo(dep)
	now := time.Now()
	rt.mu.Lock()
	if rt.ended {
		rt.mu.Unlock()
		return ctx
	}
	call := rt.open(d.spanName, d.spanName, nil, d, time.Time{})
	_, sp := rt.t.tracer.Start(call.ctx, "attempt "+dep,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(now), trace.WithAttributes(d.spanDep))
	call.attempts = append(call.attempts, attempt{span: sp, start: now})
	rt.mu.Unlock()
	return trace.ContextWithSpan(ctx, sp)
}

// startCacheRead opens the fallback span of dep and the cache call under it
// if need be, and starts the read's attempt span there; a nil span when
// the request has ended.
func (rt *reqTrace) startCacheRead(ctx context.Context, dep string) (context.Context, trace.Span) {
	d := depInfo(dep)
	c := depInfo(cacheDependency)
	rt.mu.Lock()
	if rt.ended {
		rt.mu.Unlock()
		return ctx, nil
	}
	fb := rt.open(d.fallbackName, d.fallbackName, nil, d, time.Time{})
	call := rt.open(cacheKey(dep), c.spanName, fb, c, time.Time{})
	_, sp := rt.t.tracer.Start(call.ctx, "attempt "+cacheDependency,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(c.spanDep))
	rt.mu.Unlock()
	return trace.ContextWithSpan(ctx, sp), sp
}

// onEvent files a guard's event. It reports false for the events it does
// not place (the cache guard's, whose fallback it cannot tell).
func (rt *reqTrace) onEvent(ctx context.Context, d *depAttrs, name string, e resilience.Event) bool {
	end := e.Start.Add(e.Duration)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.ended {
		return false
	}
	if d.name == cacheDependency {
		// The read's own span is made by the Redis hook under its
		// fallback. A refused read (open breaker, full bulkhead) waits for
		// its lookup to say whose fallback it is.
		if e.Attempt > 0 {
			return true
		}
		done := ctx.Done()
		if done == nil {
			return false // the caller places it under the server span
		}
		if rt.refused == nil {
			rt.refused = make(map[<-chan struct{}]resilience.Event, 1)
		}
		rt.refused[done] = e
		return true
	}
	if e.Fallback {
		if call, ok := rt.spans[d.spanName]; ok {
			rt.finish(call, time.Time{}) // the call is over once its fallback runs
		}
		if c, ok := rt.spans[cacheKey(d.name)]; ok {
			rt.finish(c, time.Time{})
		}
		fb := rt.open(d.fallbackName, d.fallbackName, nil, d, e.Start)
		fb.span.SetAttributes(attrSpanEvent.String(name))
		if e.Err != nil {
			fb.span.RecordError(e.Err, trace.WithTimestamp(end))
		}
		fb.event, fb.failed, fb.end = name, spanIsError(e), end
		rt.finish(fb, time.Time{})
		return true
	}
	call := rt.open(d.spanName, d.spanName, nil, d, e.Start)
	call.event, call.failed = name, spanIsError(e)
	if end.After(call.end) {
		call.end = end
	}
	if e.Attempt == 0 {
		if e.Err != nil {
			call.span.RecordError(e.Err, trace.WithTimestamp(end))
		}
		return true
	}
	sp := call.claim(e.Start)
	if sp == nil {
		_, sp = rt.t.tracer.Start(call.ctx, "attempt "+d.name,
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(e.Start), trace.WithAttributes(d.spanDep))
	}
	sp.SetAttributes(attrSpanEvent.String(name), attrSpanAttempt.Int(e.Attempt),
		attrSpanHedge.Bool(e.Hedge), attrSpanProbe.Bool(e.Probe))
	if e.Err != nil {
		sp.RecordError(e.Err, trace.WithTimestamp(end))
	}
	if spanIsError(e) {
		sp.SetStatus(codes.Error, name)
	}
	sp.End(trace.WithTimestamp(end))
	return true
}

// claim takes the live attempt span whose start is nearest start: with
// retries there is one open at a time; a hedge and its primary started a
// hedge delay apart.
func (s *liveSpan) claim(start time.Time) trace.Span {
	best := -1
	for i, a := range s.attempts {
		if best < 0 || absDur(a.start.Sub(start)) < absDur(s.attempts[best].start.Sub(start)) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	sp := s.attempts[best].span
	s.attempts = append(s.attempts[:best], s.attempts[best+1:]...)
	return sp
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// cacheOutcome labels dep's cache call with what the lookup found; a read
// the cache guard refused gets its span under dep's fallback here.
func (rt *reqTrace) cacheOutcome(ctx context.Context, dep, outcome string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.ended {
		return false
	}
	if e, ok := rt.refused[ctx.Done()]; ok {
		delete(rt.refused, ctx.Done())
		d, c := depInfo(dep), depInfo(cacheDependency)
		fb := rt.open(d.fallbackName, d.fallbackName, nil, d, e.Start)
		call := rt.open(cacheKey(dep), c.spanName, fb, c, e.Start)
		if e.Err != nil {
			call.span.RecordError(e.Err, trace.WithTimestamp(e.Start))
		}
		call.span.SetAttributes(attrSpanOutcome.String(outcome))
		call.event, call.failed, call.end = e.Name(), spanIsError(e), e.Start
		rt.finish(call, time.Time{})
		return true
	}
	c, ok := rt.spans[cacheKey(dep)]
	if !ok || c.done {
		return false
	}
	c.span.SetAttributes(attrSpanOutcome.String(outcome))
	c.event = EventCacheMiss
	if outcome == "hit" {
		c.event = EventCacheHit
	}
	rt.finish(c, time.Time{})
	return true
}

// finish ends s with its last event as outcome, at its last event's end or
// now. rt.mu held.
func (rt *reqTrace) finish(s *liveSpan, now time.Time) {
	if s.done {
		return
	}
	s.done = true
	for _, a := range s.attempts {
		a.span.End() // never reported: the guard has no listener, or the call was cut short
	}
	s.attempts = nil
	if s.event != "" {
		s.span.SetAttributes(attrSpanEvent.String(s.event))
	}
	if s.failed {
		s.span.SetStatus(codes.Error, s.event)
	}
	end := s.end
	if end.IsZero() {
		end = now
	}
	if end.IsZero() {
		s.span.End()
		return
	}
	s.span.End(trace.WithTimestamp(end))
}

// end closes every span still open as the request ends.
func (rt *reqTrace) end() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.ended = true
	now := time.Now()
	for _, s := range rt.spans {
		rt.finish(s, now)
	}
	c := depInfo(cacheDependency)
	for _, e := range rt.refused { // no lookup followed: no fallback to put them under
		_, sp := rt.t.tracer.Start(rt.ctx, c.spanName, trace.WithTimestamp(e.Start),
			trace.WithAttributes(c.spanDep, attrSpanEvent.String(e.Name())))
		if spanIsError(e) {
			sp.SetStatus(codes.Error, e.Name())
		}
		sp.End(trace.WithTimestamp(e.Start))
	}
}
