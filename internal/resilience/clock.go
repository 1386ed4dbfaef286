package resilience

import (
	"context"
	"time"
)

// Clock is a guard's one source of time. It reads the time (windows, the
// breaker's sleep, latencies), waits (backoffs, hedge delays, a bulkhead
// queue) and ends the calls' sub-budget contexts. The deadlines of the
// callers' contexts are read as times of the same clock. SystemClock is the
// real one; tests inject their own.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
	// WithDeadline is context.WithDeadline on this clock.
	WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc)
}

// SystemClock is the real clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time                         { return time.Now() }
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (SystemClock) WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, d)
}
