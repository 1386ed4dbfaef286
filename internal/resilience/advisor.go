package resilience

import (
	"strconv"
	"time"
)

// Snapshot is a guard's state and rolling statistics at one instant; its
// JSON is one dependency of the contract's /v1/resilience document.
type Snapshot struct {
	Name    string `json:"name"`
	Breaker State  `json:"breaker"`
	// Counts over the window by event name: the kinds, retry,
	// fallback_success, fallback_failure, cache_hit and cache_miss.
	Counts map[string]int64 `json:"counts"`
	// ErrorPercent is failures and timeouts over the calls that reached the
	// dependency.
	ErrorPercent float64 `json:"error_percent"`
	// Latency of every attempt that reached the dependency.
	Latency  Percentiles `json:"latency_ms"`
	Bulkhead Usage       `json:"bulkhead"`
	// Timeout is the sub-budget in force: with TimeoutMode "auto" the value
	// learnt so far, within TimeoutMin and TimeoutMax (nil when "fixed").
	Timeout     Millis  `json:"timeout_ms"`
	TimeoutMode string  `json:"timeout_mode"`
	TimeoutMin  *Millis `json:"timeout_min_ms"`
	TimeoutMax  *Millis `json:"timeout_max_ms"`
	// RecommendedTimeout is max(3×P99, 2×P99.9) + TimeoutMargin over the
	// successful calls, rounded up to the millisecond; nil below
	// AdvisorMinSuccesses of them.
	RecommendedTimeout *Millis `json:"recommended_timeout_ms"`
	WindowMS           int64   `json:"window_ms"`
}

// Usage is a bulkhead's slots at one instant. Queued is always 0: there is
// no wait queue.
type Usage struct {
	InUse    int64 `json:"in_use"`
	Capacity int64 `json:"capacity"`
	Queued   int64 `json:"queued"`
}

// Millis is a duration whose JSON is a number of milliseconds, to the
// microsecond.
type Millis time.Duration

// MarshalJSON writes m in milliseconds.
func (m Millis) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(time.Duration(m).Microseconds())/1000, 'f', -1, 64), nil
}

// AdvisorMinSuccesses is how many successful calls the window must hold
// before a timeout is recommended.
const AdvisorMinSuccesses = 100

// TimeoutChange reports a move of an adaptive sub-budget towards
// Recommended, the rule's figure over Successes successful calls.
type TimeoutChange struct {
	Dependency  string
	From, To    time.Duration
	At          time.Time
	Recommended time.Duration
	Successes   int64
}

// TimeoutListener is implemented by a Listener that wants to hear of an
// adaptive sub-budget's moves.
type TimeoutListener interface {
	OnTimeoutChange(c TimeoutChange)
}

// An adaptive sub-budget looks at the window once per adaptEvery at most,
// moves only when the rule's figure is more than adaptDeadBand away or
// pinned at a bound, and by at most adaptStep of its value a move.
const (
	adaptEvery    = time.Second
	adaptDeadBand = 0.10
	adaptStep     = 0.25
)

// advice is the window as the advisor reads it.
type advice struct {
	state State
	c     [numCounters]int64
	calls int64         // successes, failures and timeouts
	ok    Percentiles   // of the successful attempts
	rec   time.Duration // the recommended timeout; 0 below AdvisorMinSuccesses
}

func (g *Guard) advise(s *settings, now time.Time) (a advice) {
	a.state, a.c, a.ok = g.breaker.reported(), s.window.counts(now, time.Time{}), s.window.latencies(now, true)
	a.calls = a.c[cSuccess] + a.c[cFailure] + a.c[cTimeout]
	if a.ok.Count >= AdvisorMinSuccesses {
		a.rec = (max(3*a.ok.P99, 2*a.ok.P999) + s.cfg.TimeoutMargin + time.Millisecond - 1).Truncate(time.Millisecond)
	}
	return a
}

// subBudget is the sub-budget of a call starting at now, once an adaptive
// one has had its look at the window.
func (g *Guard) subBudget(s *settings, now time.Time) time.Duration {
	last := g.lookedAt.Load()
	if s.cfg.AutoTimeout && now.UnixNano()-last >= int64(adaptEvery) && g.lookedAt.CompareAndSwap(last, now.UnixNano()) {
		if change := g.adapt(s, now); change != nil {
			if l, ok := g.listener.(TimeoutListener); ok {
				l.OnTimeoutChange(*change)
			}
		}
	}
	return time.Duration(g.timeout.Load())
}

// adapt moves the adaptive sub-budget a step towards the recommendation.
// It holds still without one, and unless the breaker is closed and
// successes outnumber failures and timeouts (a hang yields no successes,
// so it never raises it); and it does not shrink while over 0.1% of calls
// time out (the successes are then censored at the sub-budget, and their
// tail reads low).
func (g *Guard) adapt(s *settings, now time.Time) *TimeoutChange {
	a := g.advise(s, now)
	closed := a.state == StateClosed || a.state == StateForcedClosed
	if a.rec == 0 || !closed || a.c[cFailure]+a.c[cTimeout] >= a.c[cSuccess] {
		return nil
	}
	lo, hi := s.cfg.autoBounds()
	target, cur := min(max(a.rec, lo), hi), time.Duration(g.timeout.Load())
	diff, step := target-cur, time.Duration(adaptStep*float64(cur))
	switch {
	case diff < 0 && a.c[cTimeout]*1000 > a.calls:
		return nil
	case target != lo && target != hi && float64(max(diff, -diff)) <= adaptDeadBand*float64(cur):
		return nil
	}
	next := min(max((cur+min(max(diff, -step), step)).Round(time.Millisecond), lo), hi)
	if next == cur {
		return nil
	}
	g.timeout.Store(int64(next))
	return &TimeoutChange{Dependency: g.name, From: cur, To: next, At: now, Recommended: target, Successes: a.ok.Count}
}

// Snapshot reads the guard's state.
func (g *Guard) Snapshot() Snapshot {
	s, now := g.cur.Load(), g.clock.Now()
	a := g.advise(s, now)
	snap := Snapshot{Name: g.name, Breaker: a.state, Counts: make(map[string]int64, numCounters),
		Latency: s.window.latencies(now, false), Bulkhead: Usage{InUse: g.inUse.Load(), Capacity: g.capacity.Load()},
		Timeout: Millis(g.timeout.Load()), TimeoutMode: "fixed", WindowMS: s.cfg.Breaker.Window.Milliseconds()}
	for i, n := range a.c {
		snap.Counts[counterNames[i]] = n
	}
	if a.calls > 0 {
		snap.ErrorPercent = float64(a.c[cFailure]+a.c[cTimeout]) * 100 / float64(a.calls)
	}
	if s.cfg.AutoTimeout {
		lo, hi := s.cfg.autoBounds()
		snap.TimeoutMode, snap.TimeoutMin, snap.TimeoutMax = "auto", ptr(Millis(lo)), ptr(Millis(hi))
	}
	if a.rec > 0 {
		snap.RecommendedTimeout = ptr(Millis(a.rec))
	}
	return snap
}

func ptr[T any](v T) *T { return &v }
