package resilience

import (
	"context"
	"time"
)

// attemptResult is one attempt's outcome: fn's value and error, and their Kind.
type attemptResult[T any] struct {
	v    T
	err  error
	kind Kind
}

// hedged runs one attempt and, if it has not answered after the observed
// high-percentile latency, a backup attempt beside it. The first good answer
// wins and the other attempt is cancelled; hedged returns only after every
// attempt it started has returned, so nothing outlives the call. A hedge
// needs a free bulkhead slot, room in the retry budget and time left in the
// sub-budget; otherwise the primary runs alone.
func hedged[T any](ctx, cctx context.Context, g *Guard, s *settings, attempts int, fn func(context.Context) (T, error)) (attemptResult[T], int) {
	results := make(chan attemptResult[T], 2)
	launch := func(n int, hedge bool) context.CancelCauseFunc {
		actx, cancel := context.WithCancelCause(cctx)
		go func() {
			r := attempt(ctx, actx, g, s, n, hedge, ticket{}, time.Time{}, fn)
			if hedge {
				g.bulkhead.release() // the hedge's own slot, taken below
			}
			results <- r
		}()
		return cancel
	}

	attempts++
	cancels := []context.CancelCauseFunc{launch(attempts, false)}
	running := 1
	timer := g.clock.NewTimer(g.hedgeDelay(s, g.clock.Now()))
	defer timer.Stop()
	timerC := timer.C()

	var last attemptResult[T]
	for running > 0 {
		select {
		case r := <-results:
			running--
			last = r
			if r.kind == KindSuccess || r.kind == KindBadRequest {
				for _, c := range cancels {
					c(errHedgeLost)
				}
				for ; running > 0; running-- {
					<-results
				}
				return r, attempts
			}
		case <-timerC:
			timerC = nil
			now := g.clock.Now()
			dl, _ := cctx.Deadline()
			if time.Until(dl) > g.typicalLatency(s, now) && g.retryBudgetLeft(s, now) && g.bulkhead.tryAcquire() {
				attempts++
				running++
				cancels = append(cancels, launch(attempts, true))
			}
		}
	}
	for _, c := range cancels {
		c(nil)
	}
	return last, attempts
}
