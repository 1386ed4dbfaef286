package resilience

import (
	"context"
	"errors"
	"sync"
	"time"
)

// fakeClock moves only when told to. Its deadline contexts end when the
// clock reaches their deadline. With auto set, every wait (After) moves the
// clock by its length at once, so backoffs cost no real time.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	auto   bool
	timers []fakeTimer
}

type fakeTimer struct {
	at   time.Time
	fire func()
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d, firing what falls due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	keep := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			keep = append(keep, t)
			continue
		}
		due = append(due, t.fire)
	}
	c.timers = keep
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	auto := c.auto
	at := c.now.Add(d)
	c.timers = append(c.timers, fakeTimer{at: at, fire: func() { ch <- at }})
	c.mu.Unlock()
	if auto || d <= 0 {
		c.Advance(max(d, 0))
	}
	return ch
}

func (c *fakeClock) WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	inner, cancel := context.WithCancelCause(ctx)
	dc := &deadlineCtx{Context: inner, deadline: d}
	if pd, ok := ctx.Deadline(); ok && pd.Before(d) {
		dc.deadline = pd
	}
	c.mu.Lock()
	c.timers = append(c.timers, fakeTimer{at: d, fire: func() { cancel(context.DeadlineExceeded) }})
	c.mu.Unlock()
	c.Advance(0) // a deadline already passed ends the context at once
	return dc, func() { cancel(context.Canceled) }
}

// deadlineCtx is a context ended by a fakeClock at its deadline.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Err() error {
	if c.Context.Err() != nil && errors.Is(context.Cause(c.Context), context.DeadlineExceeded) {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

// withDeadline is a caller's context ending d from now on clk.
func withDeadline(clk *fakeClock, d time.Duration) (context.Context, context.CancelFunc) {
	return clk.WithDeadline(context.Background(), clk.Now().Add(d))
}

// hang is a dependency that takes d of clk's time to answer nothing, then
// waits for its context, like an HTTP call to a hung server.
func hang(clk *fakeClock, d time.Duration) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		clk.Advance(d)
		<-ctx.Done()
		return "", ctx.Err()
	}
}
