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
	Latency      Percentiles
	InUse        int64
	Capacity     int64
	Queued       int64
	Timeout      time.Duration
	// RecommendedTimeout = max(3×P99, 2×P99.9) + TimeoutMargin, from the
	// window's latency; 0 while there is no latency history.
	RecommendedTimeout time.Duration
	// Warnings explain when the configured timeout and the observed latency
	// disagree.
	Warnings []string
}

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
		Name:     g.name,
		Breaker:  g.breaker.reported(),
		Counts:   make(map[string]int64, numCounters),
		Latency:  s.window.histogram(now).percentiles(),
		InUse:    g.bulkhead.inUse.Load(),
		Capacity: g.bulkhead.capacity.Load(),
		Queued:   g.bulkhead.queued.Load(),
		Timeout:  s.cfg.Timeout,
	}
	for i, n := range c {
		snap.Counts[counterNames[i]] = n
	}
	if calls := c[cSuccess] + c[cFailure] + c[cTimeout]; calls > 0 {
		snap.ErrorPercent = float64(c[cFailure]+c[cTimeout]) * 100 / float64(calls)
	}
	if snap.Latency.Count > 0 {
		snap.RecommendedTimeout = RecommendTimeout(snap.Latency, s.cfg.TimeoutMargin)
		if s.cfg.Timeout < snap.Latency.P999 {
			snap.Warnings = append(snap.Warnings, fmt.Sprintf(
				"timeout %v is below the observed P99.9 %v: healthy calls are being cut off; recommended %v",
				s.cfg.Timeout, snap.Latency.P999, snap.RecommendedTimeout))
		}
		if requestDeadline > 0 && snap.RecommendedTimeout >= requestDeadline {
			snap.Warnings = append(snap.Warnings, fmt.Sprintf(
				"recommended timeout %v does not fit the request deadline %v: the dependency is too slow for this page",
				snap.RecommendedTimeout, requestDeadline))
		}
	}
	return snap
}

// RecommendTimeout is the background reading's rule:
// max(3×P99, 2×P99.9) plus a margin for jitter.
func RecommendTimeout(p Percentiles, margin time.Duration) time.Duration {
	return max(3*p.P99, 2*p.P999) + margin
}
