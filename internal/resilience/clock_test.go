package resilience

import (
	"sync"
	"time"
)

// fakeClock moves only when told to. With auto set, every timer fires at
// once and moves the clock to its deadline, so backoffs and hedge delays
// cost no real time.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	auto   bool
	timers []*fakeTimer
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	c.timers = keep
	now := c.now
	c.mu.Unlock()
	for _, t := range due {
		t.fire(now)
	}
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{ch: make(chan time.Time, 1)}
	c.mu.Lock()
	if c.auto {
		c.now = c.now.Add(d)
		now := c.now
		c.mu.Unlock()
		t.fire(now)
		return t
	}
	t.at = c.now.Add(d)
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	return t
}

type fakeTimer struct {
	at      time.Time
	ch      chan time.Time
	mu      sync.Mutex
	stopped bool
}

func (t *fakeTimer) fire(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.ch <- now
		t.stopped = true
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}
