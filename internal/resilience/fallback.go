package resilience

import "context"

// Fallback runs fb after a guarded call failed with cause, bounded by the
// guard's FallbackTimeout and ctx's deadline, and reports fallback_success or
// fallback_failure to the listener. fb gets the cause so it can choose by
// kind; it must not call the dependency that failed (that is what failed).
func Fallback[T any](ctx context.Context, g *Guard, cause error, fb func(context.Context, error) (T, error)) (T, error) {
	s := g.cur.Load()
	start := g.clock.Now()
	fctx, cancel := context.WithTimeout(ctx, s.cfg.FallbackTimeout)
	defer cancel()
	v, err := fb(fctx, cause)
	end := g.clock.Now()
	c, kind := cFallbackSuccess, KindSuccess
	if err != nil {
		c, kind = cFallbackFailure, KindFailure
	}
	s.window.add(end, c)
	if g.listener != nil {
		g.listener.OnEvent(ctx, Event{Dependency: g.name, Kind: kind, Fallback: true, Start: start, Duration: end.Sub(start), Err: err})
	}
	return v, err
}

// RecordCacheLookup counts a last-good cache lookup made for this
// dependency's fallback, so the rolling counts show cache_hit and cache_miss
// beside the fallback outcomes (a fallback may consult more than a cache).
func (g *Guard) RecordCacheLookup(hit bool) {
	c := cCacheMiss
	if hit {
		c = cCacheHit
	}
	g.cur.Load().window.add(g.clock.Now(), c)
}
