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
	// ErrorPercent is failures and timeouts over the calls that reached it.
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
	// RecommendedTimeout is the advisor's rule (recommended); nil without one.
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

func (m Millis) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(time.Duration(m).Microseconds())/1000, 'f', -1, 64), nil
}

// AdvisorMinSuccesses is the successful calls a recommendation needs.
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

// An adaptive sub-budget looks at the window once per adaptEvery at most,
// moves only when the rule's figure is more than adaptDeadBand away or
// pinned at a bound, and by at most adaptStep of its value a move.
const (
	adaptEvery    = time.Second
	adaptDeadBand = 0.10
	adaptStep     = 0.25
)

// recommended is the advisor's rule over the successful attempts ok:
// max(3×P99, 2×P99.9) + margin, rounded up to the millisecond; 0 below
// AdvisorMinSuccesses of them.
func recommended(ok Percentiles, margin time.Duration) time.Duration {
	if ok.Count < AdvisorMinSuccesses {
		return 0
	}
	return (time.Duration(max(3*ok.P99, 2*ok.P999)) + margin + time.Millisecond - 1).Truncate(time.Millisecond)
}

// subBudget is the sub-budget of a call starting at now, once an adaptive
// one has had its look at the window.
func (g *Guard) subBudget(s *settings, now time.Time) time.Duration {
	last := g.lookedAt.Load()
	if s.cfg.AutoTimeout && now.UnixNano()-last >= int64(adaptEvery) && g.lookedAt.CompareAndSwap(last, now.UnixNano()) {
		if change := g.adapt(s, now); change != nil && g.listener != nil {
			g.listener.OnTimeoutChange(*change)
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
	c, ok, st := s.window.counts(now, time.Time{}), s.window.latencies(now, true), g.breaker.reported()
	rec := recommended(ok, s.cfg.TimeoutMargin)
	if rec == 0 || (st != StateClosed && st != StateForcedClosed) || c.bad() >= c[KindSuccess] {
		return nil
	}
	lo, hi := s.cfg.autoBounds()
	target, cur := min(max(rec, lo), hi), time.Duration(g.timeout.Load())
	diff, step := target-cur, time.Duration(adaptStep*float64(cur))
	switch {
	case diff < 0 && c[KindTimeout]*1000 > c.calls():
		return nil
	case target != lo && target != hi && float64(max(diff, -diff)) <= adaptDeadBand*float64(cur):
		return nil
	}
	next := min(max((cur+min(max(diff, -step), step)).Round(time.Millisecond), lo), hi)
	if next == cur {
		return nil
	}
	g.timeout.Store(int64(next))
	return &TimeoutChange{Dependency: g.name, From: cur, To: next, At: now, Recommended: target, Successes: ok.Count}
}

// Snapshot reads the guard's state.
func (g *Guard) Snapshot() Snapshot {
	s, now := g.cur.Load(), g.clock.Now()
	c, rec := s.window.counts(now, time.Time{}), recommended(s.window.latencies(now, true), s.cfg.TimeoutMargin)
	snap := Snapshot{Name: g.name, Breaker: g.breaker.reported(), Counts: make(map[string]int64, numCounters),
		Latency: s.window.latencies(now, false), Bulkhead: Usage{InUse: g.inUse.Load(), Capacity: g.capacity.Load()},
		Timeout: Millis(g.timeout.Load()), TimeoutMode: "fixed", WindowMS: s.cfg.Breaker.Window.Milliseconds()}
	for i, n := range c {
		snap.Counts[counterNames[i]] = n
	}
	if calls := c.calls(); calls > 0 {
		snap.ErrorPercent = float64(c.bad()) * 100 / float64(calls)
	}
	if s.cfg.AutoTimeout {
		lo, hi := s.cfg.autoBounds()
		snap.TimeoutMode, snap.TimeoutMin, snap.TimeoutMax = "auto", new(Millis(lo)), new(Millis(hi))
	}
	if rec > 0 {
		snap.RecommendedTimeout = new(Millis(rec))
	}
	return snap
}
