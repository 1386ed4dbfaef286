package resilience

import (
	"cmp"
	"fmt"
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
	// Latency of every attempt that reached the dependency; SuccessLatency
	// of the successful ones, the advisor's input.
	Latency        Percentiles `json:"latency_ms"`
	SuccessLatency Percentiles `json:"-"`
	Bulkhead       Usage       `json:"bulkhead"`
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
	// Warnings, never nil, say when the timeout and the latency disagree;
	// there are none while the breaker is open or half-open, or while
	// failures and timeouts outnumber successes.
	Warnings []string `json:"warnings"`
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
	state   State
	c       [numCounters]int64
	calls   int64         // successes, failures and timeouts
	ok      Percentiles   // of the successful attempts
	rec     time.Duration // the recommended timeout, if ok.Count reaches AdvisorMinSuccesses
	healthy bool          // the breaker is closed and successes outnumber failures and timeouts
}

func (g *Guard) advise(s *settings, now time.Time) (a advice) {
	a.state, a.c, a.ok = g.breaker.reported(), s.window.counts(now, time.Time{}), s.window.latencies(now, true).percentiles()
	a.calls = a.c[cSuccess] + a.c[cFailure] + a.c[cTimeout]
	a.healthy = (a.state == StateClosed || a.state == StateForcedClosed) && a.c[cFailure]+a.c[cTimeout] < a.c[cSuccess]
	if a.ok.Count >= AdvisorMinSuccesses {
		a.rec = (max(3*a.ok.P99, 2*a.ok.P999) + s.cfg.TimeoutMargin + time.Millisecond - 1).Truncate(time.Millisecond)
	}
	return a
}

// autoBounds are an adaptive sub-budget's limits, timeout_min and
// timeout_max, both kept strictly below the calls' end (WithCallsEnd).
func (g *Guard) autoBounds(cfg *Config) (lo, hi time.Duration) {
	lo, hi = cfg.TimeoutMin, cmp.Or(cfg.TimeoutMax, cfg.Timeout)
	if g.callsEnd > 0 {
		lo, hi = min(lo, g.callsEnd-time.Millisecond), min(hi, g.callsEnd-time.Millisecond)
	}
	return lo, hi
}

// inForce is the sub-budget in force.
func (g *Guard) inForce(s *settings) time.Duration {
	if s.cfg.AutoTimeout {
		return time.Duration(g.learnt.Load())
	}
	return s.cfg.Timeout
}

// timeout is the sub-budget of a call starting at now, once an adaptive
// one has had its look at the window.
func (g *Guard) timeout(s *settings, now time.Time) time.Duration {
	last := g.lookedAt.Load()
	if s.cfg.AutoTimeout && now.UnixNano()-last >= int64(adaptEvery) && g.lookedAt.CompareAndSwap(last, now.UnixNano()) {
		if change := g.adapt(s, now); change != nil {
			if l, ok := g.listener.(TimeoutListener); ok {
				l.OnTimeoutChange(*change)
			}
		}
	}
	return g.inForce(s)
}

// adapt moves the adaptive sub-budget a step towards the recommendation.
// It holds still without one, and unless the window is healthy (a hang
// yields no successes, so it never raises it); and it does not shrink while
// over 0.1% of calls time out (the successes are then censored at the
// sub-budget, and their tail reads low).
func (g *Guard) adapt(s *settings, now time.Time) *TimeoutChange {
	a := g.advise(s, now)
	if !a.healthy || a.ok.Count < AdvisorMinSuccesses {
		return nil
	}
	lo, hi := g.autoBounds(&s.cfg)
	target, cur := min(max(a.rec, lo), hi), time.Duration(g.learnt.Load())
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
	g.learnt.Store(int64(next))
	return &TimeoutChange{Dependency: g.name, From: cur, To: next, At: now, Recommended: target, Successes: a.ok.Count}
}

// Snapshot reads the guard's state.
func (g *Guard) Snapshot() Snapshot {
	s, now := g.cur.Load(), g.clock.Now()
	a, timeout := g.advise(s, now), g.inForce(s)
	snap := Snapshot{Name: g.name, Breaker: a.state, Counts: make(map[string]int64, numCounters),
		Latency: s.window.latencies(now, false).percentiles(), SuccessLatency: a.ok,
		Bulkhead: g.bulkhead.usage(), Timeout: Millis(timeout), TimeoutMode: "fixed",
		WindowMS: s.cfg.Breaker.Window.Milliseconds(), Warnings: []string{}}
	for i, n := range a.c {
		snap.Counts[counterNames[i]] = n
	}
	if a.calls > 0 {
		snap.ErrorPercent = float64(a.c[cFailure]+a.c[cTimeout]) * 100 / float64(a.calls)
	}
	lo, hi := g.autoBounds(&s.cfg)
	if s.cfg.AutoTimeout {
		snap.TimeoutMode, snap.TimeoutMin, snap.TimeoutMax = "auto", ptr(Millis(lo)), ptr(Millis(hi))
	}
	if a.ok.Count < AdvisorMinSuccesses {
		return snap
	}
	snap.RecommendedTimeout = ptr(Millis(a.rec))
	if !a.healthy {
		return snap
	}
	rec, to := a.rec, timeout.Round(time.Millisecond)
	switch {
	case rec <= timeout || (s.cfg.AutoTimeout && timeout < hi): // fine, or on its way up
	case a.c[cTimeout]*1000 >= a.calls: // 0.1% of calls or more time out
		snap.Warnings = append(snap.Warnings, fmt.Sprintf("timeout %v is below the recommended %v and %.1f%% of calls time out: "+
			"healthy calls are being cut off (successful calls reach P99.9 %v)",
			to, rec, float64(a.c[cTimeout])*100/float64(a.calls), a.ok.P999.Round(time.Millisecond)))
	default:
		snap.Warnings = append(snap.Warnings, fmt.Sprintf("timeout %v is below the recommended %v "+
			"(max(3×P99, 2×P99.9) + margin over %d successful calls)", to, rec, a.ok.Count))
	}
	if g.callsEnd > 0 && rec >= g.callsEnd {
		snap.Warnings = append(snap.Warnings, fmt.Sprintf("recommended timeout %v reaches the calls' end %v (deadline − reserve), "+
			"where a cut is the page's DEADLINE, unseen by the breaker: the dependency is too slow for this page", rec, g.callsEnd))
	}
	return snap
}

func ptr[T any](v T) *T { return &v }
