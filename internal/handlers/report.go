package handlers

import (
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// ResilienceReport is the /v1/resilience document, which the dashboard
// streams too: each guard's Snapshot, in the order given.
type ResilienceReport struct {
	GeneratedAt  time.Time             `json:"generated_at"`
	DeadlineMS   int64                 `json:"deadline_ms"`
	Dependencies []resilience.Snapshot `json:"dependencies"`
}

// NewResilienceReport reads every guard, in the order given. deadline is
// the whole request's budget.
func NewResilienceReport(now time.Time, deadline time.Duration, guards []*resilience.Guard) ResilienceReport {
	r := ResilienceReport{GeneratedAt: now.UTC(), DeadlineMS: deadline.Milliseconds(), Dependencies: []resilience.Snapshot{}}
	for _, g := range guards {
		r.Dependencies = append(r.Dependencies, g.Snapshot())
	}
	return r
}
