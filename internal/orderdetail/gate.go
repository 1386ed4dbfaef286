package orderdetail

import (
	"errors"
	"sync/atomic"

	"github.com/orderagg/orderagg/internal/resilience"
)

// coreGate decides whether a page may call the other dependencies before
// the order has resolved.
//
// Normally it may: a slow order then overlaps the others and the page costs
// the slowest call, not the sum. But while the order's breaker refuses calls
// the order can only come from the last-good cache, and for an order that
// is not cached every call to the others would be thrown away with the 503
// (2.4 calls per refused page, measured). So once an order call has been
// short-circuited, pages resolve the order first — a cache read, unless the
// breaker lets a probe through — and call the others only when there is an
// order to show. The first answer from the order service (a page, or a 404)
// restores the overlap.
//
// The gate learns from outcomes rather than asking the breaker, so it lags
// the breaker by a page: pages already in flight when it opens fan out, and
// the first page after it closes (or after an operator forces it closed)
// calls the order alone. Both are single pages per transition.
type coreGate struct {
	refusing atomic.Bool // the last settled order call was short-circuited
}

// coreFirst reports whether the order must be resolved before the others
// are called.
func (g *coreGate) coreFirst() bool { return g.refusing.Load() }

// settle records the outcome of the order's call: err is its error, nil for
// a live answer. Failures and timeouts leave the gate as it is: the breaker
// judges those, and a probe that fails reopens it.
func (g *coreGate) settle(err error) {
	switch {
	case err == nil || errors.Is(err, ErrNotFound):
		if g.refusing.Load() {
			g.refusing.Store(false)
		}
	case resilience.KindOf(err) == resilience.KindShortCircuited:
		if !g.refusing.Load() {
			g.refusing.Store(true)
		}
	}
}
