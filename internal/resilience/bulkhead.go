package resilience

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// bulkhead caps the calls in flight to one dependency. The common path is a
// single atomic add; only when the bulkhead is full and a wait queue is
// configured does a call take the mutex and park.
//
// A slot is held until the guarded function has really returned, so a call
// that timed out but whose work is still unwinding keeps counting: the cap
// limits real work, not just waiting callers.
type bulkhead struct {
	// inUse is written twice by every call; the fields every call only
	// reads sit on other cache lines, so two cores do not fight over them.
	inUse    atomic.Int64
	_        [56]byte
	capacity atomic.Int64
	queued   atomic.Int64
	_        [48]byte

	mu      sync.Mutex
	waiters []chan struct{} // FIFO; a closed channel hands its waiter a slot
}

func (b *bulkhead) tryAcquire() bool {
	if b.inUse.Add(1) <= b.capacity.Load() {
		return true
	}
	b.inUse.Add(-1)
	return false
}

// acquire takes a slot, waiting in the queue when cfg allows it, never past
// maxWait or ctx's deadline. It reports KindRejected when the bulkhead and its
// queue are full or the wait ran out, KindDeadline when ctx ended first.
func (b *bulkhead) acquire(ctx context.Context, cfg *BulkheadConfig, maxWait time.Duration, clk Clock) (Kind, bool) {
	if b.tryAcquire() {
		return KindSuccess, true
	}
	if cfg.MaxQueue == 0 || maxWait <= 0 {
		return KindRejected, false
	}
	if b.queued.Add(1) > int64(cfg.MaxQueue) {
		b.queued.Add(-1)
		return KindRejected, false
	}
	defer b.queued.Add(-1)

	ch := make(chan struct{})
	b.mu.Lock()
	b.waiters = append(b.waiters, ch)
	b.mu.Unlock()
	// A slot may have been freed between tryAcquire and joining the queue,
	// when no releaser could see us yet: look once more.
	if b.tryAcquire() {
		if !b.leave(ch) {
			b.release() // a releaser handed us a second slot meanwhile
		}
		return KindSuccess, true
	}

	t := clk.NewTimer(maxWait)
	defer t.Stop()
	var kind Kind
	select {
	case <-ch:
		return KindSuccess, true
	case <-t.C():
		kind = KindRejected
	case <-ctx.Done():
		kind = KindDeadline
	}
	if !b.leave(ch) {
		// Handed a slot as we gave up: give it to the next in line.
		b.release()
	}
	return kind, false
}

// leave removes ch from the queue, reporting false when a releaser had
// already handed it a slot.
func (b *bulkhead) leave(ch chan struct{}) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, w := range b.waiters {
		if w == ch {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			return true
		}
	}
	return false
}

func (b *bulkhead) release() {
	b.inUse.Add(-1)
	if b.queued.Load() == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.waiters) > 0 && b.tryAcquire() {
		close(b.waiters[0])
		b.waiters = b.waiters[1:]
	}
}
