package resilience

import (
	"sync"
	"time"
)

// State is a circuit breaker's state as operators see it.
type State uint8

const (
	StateClosed State = iota
	StateOpen
	StateHalfOpen
	StateForcedOpen
	StateForcedClosed
)

var stateNames = [...]string{"CLOSED", "OPEN", "HALF_OPEN", "FORCED_OPEN", "FORCED_CLOSED"}

// String is the state as the contract spells it (CLOSED, OPEN, …).
func (s State) String() string { return stateNames[s] }

// MarshalText is String, for JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Force is an operator's override of the breaker.
type Force uint8

const (
	ForceNone   Force = iota // automatic
	ForceOpen                // every call short-circuits
	ForceClosed              // every call goes through, whatever the window says
)

// StateChange is told to the listener after every visible transition.
type StateChange struct {
	Dependency string
	From, To   State
	At         time.Time
}

// breaker opens on a run of failures or on the window's error rate, stays
// open SleepWindow, then admits one probe. Its methods return the
// transition they made, for the guard to tell the listener once the lock is
// released.
type breaker struct {
	mu      sync.Mutex
	state   State // forcing aside
	force   Force
	since   time.Time // of the last transition; while closed, the window counts only buckets from here on
	gen     uint64    // counts the transitions
	streak  int       // failures and timeouts since the last answer
	probing bool      // this half-open spell's probe is out
}

// allow admits a call (ok) or short-circuits it. An admitted half-open
// probe's ticket is its spell's generation; any other call's is 0.
func (b *breaker) allow(now time.Time, cfg *BreakerConfig) (ticket uint64, ok bool, change *StateChange) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.force == ForceOpen:
		return 0, false, nil
	case b.force == ForceClosed || b.state == StateClosed:
		return 0, true, nil
	case b.state == StateOpen && now.Sub(b.since) < cfg.SleepWindow:
		return 0, false, nil
	case b.state == StateOpen:
		change = b.set(StateHalfOpen, now)
	}
	if b.probing {
		return 0, false, change
	}
	b.probing = true
	return b.gen, true, change
}

// record feeds the breaker an attempt's outcome. A probe's (t != 0) settles
// it: an answer closes the breaker, a probe that learned nothing
// (KindDeadline) gives its place back, anything else re-opens it. Any other
// attempt the caller did not cut feeds a closed breaker: a failure or
// timeout extends the run of failures, an answer ends it. It opens when the
// run reaches ConsecutiveFailures, or when a bad attempt brings the window
// (since the last close) to MinRequests calls whose error rate reaches
// ErrorPercent.
func (b *breaker) record(t uint64, e Event, w *window, cfg *BreakerConfig) *StateChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	bad, end := e.Kind == KindFailure || e.Kind == KindTimeout, e.Start.Add(e.Duration)
	answered := e.Kind == KindSuccess || e.Kind == KindBadRequest
	switch {
	case t != 0 && (t != b.gen || b.state != StateHalfOpen):
		return nil // a probe of a spell that is over
	case t != 0 && e.Kind == KindDeadline:
		b.probing = false
		return nil
	case t != 0 && answered:
		return b.set(StateClosed, end)
	case t != 0:
		return b.set(StateOpen, end)
	case bad:
		b.streak++
	case answered:
		b.streak = 0
	}
	if b.force != ForceNone || b.state != StateClosed || !bad {
		return nil
	}
	if b.streak < cfg.ConsecutiveFailures {
		c := w.counts(end, b.since)
		calls := float64(c.calls())
		if calls < float64(cfg.MinRequests) || float64(c.bad())*100/calls < cfg.ErrorPercent {
			return nil
		}
	}
	return b.set(StateOpen, end)
}

// set moves the automatic state, which always changes it. b.mu held.
func (b *breaker) set(to State, now time.Time) *StateChange {
	c := &StateChange{From: b.state, To: to, At: now}
	b.state, b.since, b.streak, b.probing = to, now, 0, false
	b.gen++
	return c
}

// reported is the state operators see: forcing wins.
func (b *breaker) reported() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.visible()
}

// visible is reported with b.mu held.
func (b *breaker) visible() State {
	return [...]State{b.state, StateForcedOpen, StateForcedClosed}[b.force]
}

// setForce changes the override, returning the visible change.
func (b *breaker) setForce(f Force, now time.Time) *StateChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	from := b.visible()
	if b.force = f; b.visible() == from {
		return nil
	}
	return &StateChange{From: from, To: b.visible(), At: now}
}
