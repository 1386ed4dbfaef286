package handlers

import (
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// ResilienceReport is the /v1/resilience document, which the dashboard
// streams too.
type ResilienceReport struct {
	GeneratedAt  time.Time     `json:"generated_at"`
	DeadlineMS   int64         `json:"deadline_ms"`
	Dependencies []GuardReport `json:"dependencies"`
}

// GuardReport is one dependency's guard state (a resilience.Snapshot) in
// the contract's units. Breaker is CLOSED, OPEN, HALF_OPEN, FORCED_OPEN or
// FORCED_CLOSED; Counts are per event name over the rolling window;
// LatencyMS covers every attempt that reached the dependency. TimeoutMS is
// the sub-budget in force: with TimeoutMode "auto" the value learnt so far,
// between TimeoutMinMS and TimeoutMaxMS (null when "fixed").
// RecommendedTimeoutMS, from successful calls only in whole milliseconds,
// is null while the window holds too few to judge.
type GuardReport struct {
	Name                 string           `json:"name"`
	Breaker              string           `json:"breaker"`
	Counts               map[string]int64 `json:"counts"`
	ErrorPercent         float64          `json:"error_percent"`
	LatencyMS            GuardLatency     `json:"latency_ms"`
	Bulkhead             GuardBulkhead    `json:"bulkhead"`
	TimeoutMS            float64          `json:"timeout_ms"`
	TimeoutMode          string           `json:"timeout_mode"`
	TimeoutMinMS         *float64         `json:"timeout_min_ms"`
	TimeoutMaxMS         *float64         `json:"timeout_max_ms"`
	RecommendedTimeoutMS *float64         `json:"recommended_timeout_ms"`
	WindowMS             int64            `json:"window_ms"`
	Warnings             []string         `json:"warnings"`
}

// GuardLatency is a guard's latency percentiles in milliseconds over the
// rolling window.
type GuardLatency struct {
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Count int64   `json:"count"`
}

// GuardBulkhead is a guard's bulkhead use at the instant of the report.
type GuardBulkhead struct {
	InUse    int64 `json:"in_use"`
	Capacity int64 `json:"capacity"`
	Queued   int64 `json:"queued"`
}

// NewResilienceReport reads every guard, in the order given. deadline is
// the whole request's budget.
func NewResilienceReport(now time.Time, deadline time.Duration, guards []*resilience.Guard) ResilienceReport {
	r := ResilienceReport{GeneratedAt: now.UTC(), DeadlineMS: deadline.Milliseconds(), Dependencies: []GuardReport{}}
	for _, g := range guards {
		s := g.Snapshot()
		d := GuardReport{Name: s.Name, Breaker: s.Breaker.String(), Counts: s.Counts, ErrorPercent: s.ErrorPercent,
			LatencyMS:   GuardLatency{ms(s.Latency.P50), ms(s.Latency.P90), ms(s.Latency.P99), ms(s.Latency.P999), s.Latency.Count},
			Bulkhead:    GuardBulkhead{InUse: s.InUse, Capacity: s.Capacity, Queued: s.Queued},
			TimeoutMS:   ms(s.Timeout),
			TimeoutMode: "fixed",
			WindowMS:    g.Config().Breaker.Window.Milliseconds(),
			Warnings:    append([]string{}, s.Warnings...), // never null
		}
		if s.AutoTimeout {
			d.TimeoutMode, d.TimeoutMinMS, d.TimeoutMaxMS = "auto", ptr(ms(s.TimeoutMin)), ptr(ms(s.TimeoutMax))
		}
		if s.Recommended {
			d.RecommendedTimeoutMS = ptr(float64(s.RecommendedTimeout.Milliseconds()))
		}
		r.Dependencies = append(r.Dependencies, d)
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ptr(v float64) *float64 { return &v }
