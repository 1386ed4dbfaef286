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
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "UNKNOWN"
}

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

// ticket is what the breaker hands an admitted call: 0, or for a half-open
// probe its half-open spell's generation (never 0).
type ticket uint64

// breaker opens on a run of failures or on the window's error rate, sleeps
// SleepWindow, then admits one probe. Its methods return the transition
// they made, for the guard to tell the listener once the lock is released.
type breaker struct {
	mu          sync.Mutex
	state       State // forcing aside
	force       Force
	streak      int    // failures and timeouts since the last answer
	gen         uint64 // counts openings and half-openings
	openedAt    time.Time
	closedSince time.Time // the window counts only buckets from here on
	probing     bool      // this half-open spell's probe is out
}

// allow admits a call (ok) or short-circuits it.
func (b *breaker) allow(now time.Time, cfg *BreakerConfig) (t ticket, ok bool, change *StateChange) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.force == ForceOpen:
		return t, false, nil
	case b.force == ForceClosed || b.state == StateClosed:
		return t, true, nil
	case b.state == StateOpen && now.Sub(b.openedAt) < cfg.SleepWindow:
		return t, false, nil
	case b.state == StateOpen:
		change = b.set(StateHalfOpen, now)
		b.gen++
		b.probing = false
	}
	if b.probing {
		return t, false, change
	}
	b.probing = true
	return ticket(b.gen), true, change
}

// record feeds the breaker an attempt's outcome. A probe's (t != 0) settles
// it: an answer closes the breaker, a probe that learned nothing
// (KindDeadline) gives its place back, anything else re-opens it. Any other
// attempt the caller did not cut feeds a closed breaker: a failure or
// timeout extends the run of failures, an answer ends it. It opens when the
// run reaches ConsecutiveFailures, or when a bad attempt brings the window
// (since the last close) to MinRequests calls whose error rate reaches
// ErrorPercent.
func (b *breaker) record(t ticket, e Event, w *window, cfg *BreakerConfig) *StateChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	bad, end := e.Kind == KindFailure || e.Kind == KindTimeout, e.Start.Add(e.Duration)
	answered := e.Kind == KindSuccess || e.Kind == KindBadRequest
	switch {
	case t != 0 && (uint64(t) != b.gen || b.state != StateHalfOpen):
		return nil // a probe of a spell that is over
	case t != 0 && e.Kind == KindDeadline:
		b.probing = false
		return nil
	case t != 0 && !answered:
		return b.open(end)
	case t != 0:
		b.closedSince, b.streak = end, 0
		return b.set(StateClosed, end)
	case bad:
		b.streak++
	case answered:
		b.streak = 0
	}
	if b.force != ForceNone || b.state != StateClosed || !bad {
		return nil
	}
	if b.streak < cfg.ConsecutiveFailures {
		c := w.counts(end, b.closedSince)
		calls := float64(c[cSuccess] + c[cFailure] + c[cTimeout])
		if calls < float64(cfg.MinRequests) || float64(c[cFailure]+c[cTimeout])*100/calls < cfg.ErrorPercent {
			return nil
		}
	}
	return b.open(end)
}

// open opens the breaker. b.mu held.
func (b *breaker) open(now time.Time) *StateChange {
	b.openedAt, b.streak = now, 0
	b.gen++
	return b.set(StateOpen, now)
}

// set moves the automatic state, which always changes it. b.mu held.
func (b *breaker) set(to State, now time.Time) *StateChange {
	c := &StateChange{From: b.state, To: to, At: now}
	b.state = to
	return c
}

// reported is the state operators see: forcing wins.
func (b *breaker) reported() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reportedLocked()
}

func (b *breaker) reportedLocked() State {
	switch b.force {
	case ForceOpen:
		return StateForcedOpen
	case ForceClosed:
		return StateForcedClosed
	}
	return b.state
}

// setForce changes the override, returning the visible change.
func (b *breaker) setForce(f Force, now time.Time) *StateChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	from := b.reportedLocked()
	if b.force = f; b.reportedLocked() == from {
		return nil
	}
	return &StateChange{From: from, To: b.reportedLocked(), At: now}
}
