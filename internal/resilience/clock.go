package resilience

import (
	"context"
	"time"
)

// Clock is a guard's one source of time: it reads the time, waits (After)
// and ends the calls' sub-budget contexts (WithDeadline, as
// context.WithDeadline does). The deadlines of the callers' contexts are
// read as times of the same clock.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
	WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc)
}

// SystemClock is the real clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time                         { return time.Now() }
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (SystemClock) WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, d)
}
