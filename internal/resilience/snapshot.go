package resilience

import (
	"fmt"
	"time"
)

// Snapshot is a guard's state and rolling statistics at one instant.
type Snapshot struct {
	Name    string
	Breaker State
	// Counts over the window by event name: the kinds, slow, retry, hedge,
	// fallback_success, fallback_failure, cache_hit and cache_miss.
	Counts map[string]int64
	// ErrorPercent is failures and timeouts over the calls that reached the
	// dependency.
	ErrorPercent float64
	// Latency of every attempt that reached the dependency; SuccessLatency
	// of the successful ones, the advisor's input.
	Latency, SuccessLatency Percentiles
	InUse, Capacity, Queued int64
	// Timeout is the sub-budget in force: under AutoTimeout the value learnt
	// so far, within TimeoutMin and TimeoutMax (zero when fixed).
	Timeout                time.Duration
	AutoTimeout            bool
	TimeoutMin, TimeoutMax time.Duration
	// RecommendedTimeout is max(3×P99, 2×P99.9) + TimeoutMargin over the
	// successful calls; Recommended is false, and it 0, below
	// AdvisorMinSuccesses of them.
	Recommended        bool
	RecommendedTimeout time.Duration
	// Warnings say when the timeout and the latency disagree; there are none
	// while the breaker is open or half-open, or while failures and
	// timeouts outnumber successes.
	Warnings []string
}

// AdvisorMinSuccesses is how many successful calls the window must hold
// before a timeout is recommended.
const AdvisorMinSuccesses = 100

// Snapshot reads the guard's state.
func (g *Guard) Snapshot() Snapshot {
	s, now := g.cur.Load(), g.clock.Now()
	c := s.window.counts(now, time.Time{})
	inUse, capacity, queued := g.bulkhead.usage()
	snap := Snapshot{Name: g.name, Breaker: g.breaker.reported(), Counts: map[string]int64{},
		Latency: s.window.latencies(now, false).percentiles(), SuccessLatency: s.window.latencies(now, true).percentiles(),
		InUse: int64(inUse), Capacity: int64(capacity), Queued: int64(queued), Timeout: g.inForce(s), AutoTimeout: s.cfg.AutoTimeout}
	if snap.AutoTimeout {
		snap.TimeoutMin, snap.TimeoutMax = g.autoBounds(&s.cfg)
	}
	for i, n := range c {
		snap.Counts[counterNames[i]] = n
	}
	calls := c[cSuccess] + c[cFailure] + c[cTimeout]
	if calls > 0 {
		snap.ErrorPercent = float64(c[cFailure]+c[cTimeout]) * 100 / float64(calls)
	}
	if snap.SuccessLatency.Count < AdvisorMinSuccesses {
		return snap
	}
	snap.Recommended, snap.RecommendedTimeout = true, RecommendTimeout(snap.SuccessLatency, s.cfg.TimeoutMargin)
	if st := snap.Breaker; (st != StateClosed && st != StateForcedClosed) || c[cFailure]+c[cTimeout] >= c[cSuccess] {
		return snap
	}
	rec, to := snap.RecommendedTimeout, snap.Timeout.Round(time.Millisecond)
	switch {
	case rec <= snap.Timeout || (snap.AutoTimeout && snap.Timeout < snap.TimeoutMax): // fine, or on its way up
	case c[cTimeout]*1000 >= calls: // over 0.1% time out
		snap.Warnings = append(snap.Warnings, fmt.Sprintf("timeout %v is below the recommended %v and %.1f%% of calls time out: "+
			"healthy calls are being cut off (successful calls reach P99.9 %v)",
			to, rec, float64(c[cTimeout])*100/float64(calls), snap.SuccessLatency.P999.Round(time.Millisecond)))
	default:
		snap.Warnings = append(snap.Warnings, fmt.Sprintf("timeout %v is below the recommended %v "+
			"(max(3×P99, 2×P99.9) + margin over %d successful calls)", to, rec, snap.SuccessLatency.Count))
	}
	if g.callsEnd > 0 && rec >= g.callsEnd {
		snap.Warnings = append(snap.Warnings, fmt.Sprintf("recommended timeout %v reaches the calls' end %v (deadline − reserve), "+
			"where a cut is the page's DEADLINE, unseen by the breaker: the dependency is too slow for this page", rec, g.callsEnd))
	}
	return snap
}

// RecommendTimeout is max(3×P99, 2×P99.9) plus margin, rounded up to the
// millisecond.
func RecommendTimeout(p Percentiles, margin time.Duration) time.Duration {
	d := max(3*p.P99, 2*p.P999) + margin
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}
