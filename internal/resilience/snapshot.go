package resilience

import (
	"fmt"
	"time"
)

// Snapshot is a guard's state and rolling statistics at one instant, for
// /v1/resilience, the dashboard and the admin API.
type Snapshot struct {
	Name    string
	Breaker State
	// Counts per event name over the rolling window (success, failure,
	// timeout, short_circuited, rejected, bad_request, deadline, slow, retry,
	// hedge, fallback_success, fallback_failure, cache_hit, cache_miss).
	Counts map[string]int64
	// ErrorPercent is failures and timeouts over calls that reached the
	// dependency, in the window.
	ErrorPercent float64
	// Latency of every attempt that reached the dependency, timeouts
	// included: what the calls cost.
	Latency Percentiles
	// SuccessLatency of successful attempts only: the advisor's input.
	SuccessLatency Percentiles
	InUse          int64
	Capacity       int64
	Queued         int64
	// Timeout is the sub-budget in force: with AutoTimeout, the value the
	// guard has learnt so far, within [TimeoutMin, TimeoutMax].
	Timeout time.Duration
	// AutoTimeout: the sub-budget follows the rule (timeout: auto).
	// TimeoutMin and TimeoutMax are its effective bounds (timeout_max 0
	// resolved to timeout, both cut to the ceiling); zero when fixed.
	AutoTimeout            bool
	TimeoutMin, TimeoutMax time.Duration
	// Recommended is false while the window holds fewer than
	// AdvisorMinSuccesses successful calls: too few to judge a tail.
	Recommended bool
	// RecommendedTimeout = max(3×P99, 2×P99.9) + TimeoutMargin over the
	// window's successful calls, rounded up to the millisecond; 0 unless
	// Recommended.
	RecommendedTimeout time.Duration
	// Warnings explain when the configured timeout and the observed latency
	// disagree. There are none while the breaker is open or half-open, or
	// while failures and timeouts outnumber successes: the latency of a
	// sick dependency says nothing about the right timeout for a healthy one.
	Warnings []string
}

// AdvisorMinSuccesses is how many successful calls the window must hold
// before a timeout is recommended: with fewer, P99.9 is a guess.
const AdvisorMinSuccesses = 100

var counterNames = [numCounters]string{
	cSuccess:         "success",
	cFailure:         "failure",
	cTimeout:         "timeout",
	cShortCircuited:  "short_circuited",
	cRejected:        "rejected",
	cBadRequest:      "bad_request",
	cDeadline:        "deadline",
	cSlow:            "slow",
	cRetry:           "retry",
	cHedge:           "hedge",
	cFallbackSuccess: "fallback_success",
	cFallbackFailure: "fallback_failure",
	cCacheHit:        "cache_hit",
	cCacheMiss:       "cache_miss",
}

// Snapshot reads the guard's state. requestDeadline is the whole request's
// budget, used to warn when the recommended timeout no longer fits in it
// (0 skips that check).
func (g *Guard) Snapshot(requestDeadline time.Duration) Snapshot {
	s := g.cur.Load()
	now := g.clock.Now()
	c := s.window.counts(now, time.Time{})
	snap := Snapshot{
		Name:           g.name,
		Breaker:        g.breaker.reported(),
		Counts:         make(map[string]int64, numCounters),
		Latency:        s.window.histogram(now, false).percentiles(),
		SuccessLatency: s.window.histogram(now, true).percentiles(),
		InUse:          g.bulkhead.inUse.Load(),
		Capacity:       g.bulkhead.capacity.Load(),
		Queued:         g.bulkhead.queued.Load(),
		Timeout:        g.timeout(s),
	}
	if s.cfg.AutoTimeout {
		snap.AutoTimeout = true
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
	snap.Recommended = true
	snap.RecommendedTimeout = RecommendTimeout(snap.SuccessLatency, s.cfg.TimeoutMargin)
	healthy := (snap.Breaker == StateClosed || snap.Breaker == StateForcedClosed) &&
		c[cFailure]+c[cTimeout] < c[cSuccess]
	if !healthy {
		return snap
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	// An adaptive sub-budget below the rule is on its way up; only one held
	// at its ceiling needs an operator.
	if snap.RecommendedTimeout > snap.Timeout && (!snap.AutoTimeout || snap.Timeout >= snap.TimeoutMax) {
		// Timeouts at the rate a healthy tail would produce (over 0.1 %,
		// the background reading's target) while successes reach close to
		// the budget: the timeout cuts off calls that would have answered.
		// Without such timeouts the timeout is only tighter than the rule.
		if c[cTimeout]*1000 >= calls {
			snap.Warnings = append(snap.Warnings, fmt.Sprintf(
				"timeout %v is below the recommended %v and %.1f%% of calls time out: healthy calls are being cut off (successful calls reach P99.9 %v)",
				ms(snap.Timeout), snap.RecommendedTimeout, float64(c[cTimeout])*100/float64(calls), ms(snap.SuccessLatency.P999)))
		} else {
			snap.Warnings = append(snap.Warnings, fmt.Sprintf(
				"timeout %v is below the recommended %v (max(3×P99, 2×P99.9) + margin over %d successful calls)",
				ms(snap.Timeout), snap.RecommendedTimeout, snap.SuccessLatency.Count))
		}
	}
	if requestDeadline > 0 && snap.RecommendedTimeout >= requestDeadline {
		snap.Warnings = append(snap.Warnings, fmt.Sprintf(
			"recommended timeout %v does not fit the request deadline %v: the dependency is too slow for this page",
			snap.RecommendedTimeout, ms(requestDeadline)))
	}
	return snap
}

// RecommendTimeout is the background reading's rule:
// max(3×P99, 2×P99.9) plus a margin for jitter, rounded up to the
// millisecond (never below the rule, and no false precision).
func RecommendTimeout(p Percentiles, margin time.Duration) time.Duration {
	d := max(3*p.P99, 2*p.P999) + margin
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}
