// Package admission bounds the order-detail requests served at once
// (--max-inflight). It only counts and decides: the handler answers a
// refused request with an immediate 503 OVERLOADED and Retry-After.
package admission

// Limiter admits at most a fixed number of requests at once and never
// blocks. It is safe for concurrent use. The zero Limiter admits nothing.
type Limiter struct{ slots chan struct{} }

// New returns a limiter of n requests at once; n <= 0 refuses every request.
func New(n int) *Limiter { return &Limiter{slots: make(chan struct{}, max(n, 0))} }

// TryAcquire takes a slot and reports true, or reports false at once when
// all are held. Every true must be matched by one Release.
func (l *Limiter) TryAcquire() bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// Release gives back a slot taken by TryAcquire. It panics when no slot is
// held, which is a caller's bug.
func (l *Limiter) Release() {
	select {
	case <-l.slots:
	default:
		panic("admission: Release without a held slot")
	}
}

// Limit is the number of requests admitted at once.
func (l *Limiter) Limit() int { return cap(l.slots) }

// Inflight is the number of slots held now.
func (l *Limiter) Inflight() int { return len(l.slots) }
