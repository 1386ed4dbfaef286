package resilience

import (
	"sync"
	"sync/atomic"
	"time"
)

// State is a circuit breaker's state.
type State uint8

const (
	StateClosed State = iota
	StateOpen
	StateHalfOpen
	StateForcedOpen
	StateForcedClosed
)

var stateNames = [...]string{"CLOSED", "OPEN", "HALF_OPEN", "FORCED_OPEN", "FORCED_CLOSED"}

// String returns the state as the contract spells it (CLOSED, OPEN, …).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "UNKNOWN"
}

// Force overrides the breaker for operators.
type Force uint8

const (
	ForceNone   Force = iota // automatic
	ForceOpen                // every call short-circuits
	ForceClosed              // every call goes through, whatever the window says
)

// StateChange is reported to the listener after every transition.
type StateChange struct {
	Dependency string
	From, To   State
	At         time.Time
}

// ticket is what allow hands a call: whether it is a half-open probe, and the
// generation it was admitted in (a probe's result from an older generation is
// stale and ignored).
type ticket struct {
	probe bool
	gen   uint64
}

// breaker is a rolling-window circuit breaker with a consecutive-failure
// trip beside the window. The closed-state check is one atomic load; every
// transition happens under mu, and the listener is told after mu is released
// so that it cannot deadlock or slow the breaker.
//
// State is per process: each instance of the service judges its downstreams
// by what it has seen itself.
type breaker struct {
	state atomic.Uint32 // State without forcing
	force atomic.Uint32 // Force
	// streak counts failures and timeouts since the last good answer, in the
	// order they finish. Calls cut off together (a hang under a bulkhead)
	// finish together and count at once. Successes only read it unless it
	// is non-zero, so the healthy path does not bounce its cache line.
	streak atomic.Int64

	mu          sync.Mutex
	gen         uint64
	openedAt    time.Time
	sleep       time.Duration // how long this opening lasts before a probe
	level       int           // openings in a row without a lasting recovery
	closedSince time.Time     // the window counts only buckets from here on
	probes      int           // admitted in this half-open generation
	probeOKs    int
}

// maxSleepLevel bounds the doubling so the shift cannot overflow.
const maxSleepLevel = 30

// allow admits a call or reports that the breaker short-circuits it.
// The returned change is non-nil when admitting moved the breaker to half-open.
func (b *breaker) allow(now time.Time, cfg *BreakerConfig) (ticket, bool, *StateChange) {
	switch Force(b.force.Load()) {
	case ForceOpen:
		return ticket{}, false, nil
	case ForceClosed:
		return ticket{}, true, nil
	}
	if State(b.state.Load()) == StateClosed {
		return ticket{}, true, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var change *StateChange
	switch State(b.state.Load()) {
	case StateClosed:
		return ticket{}, true, nil
	case StateOpen:
		if now.Sub(b.openedAt) < b.sleep {
			return ticket{}, false, nil
		}
		change = b.setLocked(StateHalfOpen, now)
		b.gen++
		b.probes, b.probeOKs = 0, 0
	}
	if b.probes >= cfg.HalfOpenProbes {
		return ticket{}, false, change
	}
	b.probes++
	return ticket{probe: true, gen: b.gen}, true, change
}

// onProbeDone settles a half-open probe. ok reports whether the dependency
// answered well; abandoned means the caller went away before we learned
// anything, so the probe slot is handed back.
func (b *breaker) onProbeDone(t ticket, ok, abandoned bool, now time.Time, cfg *BreakerConfig) *StateChange {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen || State(b.state.Load()) != StateHalfOpen {
		return nil
	}
	switch {
	case abandoned:
		b.probes--
		return nil
	case !ok:
		// Still sick: sleep longer before asking again.
		b.level = min(b.level+1, maxSleepLevel)
		return b.openLocked(now, cfg)
	}
	b.probeOKs++
	if b.probeOKs < cfg.HalfOpenProbes {
		return nil
	}
	b.closedSince = now
	b.streak.Store(0)
	return b.setLocked(StateClosed, now)
}

// onResult feeds the consecutive-failure trip with a non-probe attempt's
// outcome: bad (a failure or a timeout) extends the run, good (an answer:
// success or bad request) ends it. It reports whether the run is long
// enough to open the breaker.
func (b *breaker) onResult(bad, good bool, cfg *BreakerConfig) bool {
	if bad {
		return b.streak.Add(1) >= int64(cfg.ConsecutiveFailures)
	}
	if good && b.streak.Load() != 0 {
		b.streak.Store(0)
	}
	return false
}

// evaluate opens a closed breaker when a run of consecutive failures is long
// enough (tripped) or the window's figures cross a threshold. Only failures
// and slow calls can push a rate up, so callers skip it on fast successes.
func (b *breaker) evaluate(w *window, now time.Time, cfg *BreakerConfig, tripped bool) *StateChange {
	if State(b.state.Load()) != StateClosed {
		return nil
	}
	if !tripped {
		b.mu.Lock()
		since := b.closedSince
		b.mu.Unlock()
		c := w.counts(now, since)
		calls := c[cSuccess] + c[cFailure] + c[cTimeout]
		if calls < int64(cfg.MinRequests) {
			return nil
		}
		errPct := float64(c[cFailure]+c[cTimeout]) * 100 / float64(calls)
		slowPct := float64(c[cSlow]) * 100 / float64(calls)
		if errPct < cfg.ErrorPercent && slowPct < cfg.SlowCallPercent {
			return nil
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if State(b.state.Load()) != StateClosed {
		return nil
	}
	// Opening again within a window of the last close means the recovery
	// did not hold: keep growing the sleep instead of starting over, so a
	// flapping dependency is probed ever less often. A recovery that lasted
	// a full window starts afresh.
	if !b.closedSince.IsZero() && now.Sub(b.closedSince) < cfg.Window && b.gen > 0 {
		b.level = min(b.level+1, maxSleepLevel)
	} else {
		b.level = 0
	}
	return b.openLocked(now, cfg)
}

// openLocked opens the breaker for the sleep of the current level:
// SleepWindow doubled per level, capped at MaxSleepWindow.
func (b *breaker) openLocked(now time.Time, cfg *BreakerConfig) *StateChange {
	b.openedAt = now
	b.sleep = sleepFor(b.level, cfg)
	b.gen++
	b.streak.Store(0)
	return b.setLocked(StateOpen, now)
}

// sleepFor is the sleep window after level failed recoveries in a row.
func sleepFor(level int, cfg *BreakerConfig) time.Duration {
	d, ceiling := cfg.SleepWindow, max(cfg.SleepWindow, cfg.MaxSleepWindow)
	for range level {
		if d >= ceiling {
			break
		}
		d *= 2
	}
	return min(d, ceiling)
}

func (b *breaker) setLocked(to State, now time.Time) *StateChange {
	from := State(b.state.Swap(uint32(to)))
	if from == to {
		return nil
	}
	return &StateChange{From: from, To: to, At: now}
}

// reported is the state as operators see it: forcing wins.
func (b *breaker) reported() State {
	switch Force(b.force.Load()) {
	case ForceOpen:
		return StateForcedOpen
	case ForceClosed:
		return StateForcedClosed
	}
	return State(b.state.Load())
}

// setForce changes the operator override, reporting the visible change.
func (b *breaker) setForce(f Force, now time.Time) *StateChange {
	before := b.reported()
	b.force.Store(uint32(f))
	after := b.reported()
	if before == after {
		return nil
	}
	return &StateChange{From: before, To: after, At: now}
}
