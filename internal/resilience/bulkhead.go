package resilience

import (
	"context"
	"slices"
	"sync"
	"time"
)

// bulkhead is a semaphore capping the calls in flight, with an optional
// queue served in arrival order. A slot is held until the guarded function
// has really returned, so work still unwinding after a timeout keeps
// counting: the cap limits real work, not waiting callers.
type bulkhead struct {
	mu       sync.Mutex
	inUse    int
	capacity int
	waiters  []chan struct{} // closing one hands it a slot
}

// acquire takes a slot, waiting for at most wait in a queue of at most
// maxQueue: KindSuccess with a slot, KindRejected when the bulkhead and the
// queue are full or the wait ran out, KindDeadline when ctx ended first.
func (b *bulkhead) acquire(ctx context.Context, maxQueue int, wait time.Duration, clock Clock) Kind {
	b.mu.Lock()
	if b.inUse < b.capacity {
		b.inUse++
		b.mu.Unlock()
		return KindSuccess
	}
	if len(b.waiters) >= maxQueue {
		b.mu.Unlock()
		return KindRejected
	}
	ch := make(chan struct{})
	b.waiters = append(b.waiters, ch)
	b.mu.Unlock()
	kind := KindRejected
	select {
	case <-ch:
		return KindSuccess
	case <-clock.After(wait):
	case <-ctx.Done():
		kind = KindDeadline
	}
	b.mu.Lock()
	i := slices.Index(b.waiters, ch)
	if i >= 0 {
		b.waiters = slices.Delete(b.waiters, i, i+1)
	}
	b.mu.Unlock()
	if i < 0 { // handed a slot as it gave up: pass it on
		b.release()
	}
	return kind
}

// release hands the slot to the first waiter, while within capacity, or
// frees it.
func (b *bulkhead) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 && b.inUse <= b.capacity {
		close(b.waiters[0])
		b.waiters = b.waiters[1:]
		return
	}
	b.inUse--
}

// resize sets the capacity: calls beyond a smaller one finish as they are,
// a larger one serves the queue at once.
func (b *bulkhead) resize(capacity int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.capacity = capacity; len(b.waiters) > 0 && b.inUse < capacity; b.waiters = b.waiters[1:] {
		b.inUse++
		close(b.waiters[0])
	}
}

// Usage is a bulkhead's slots at one instant.
type Usage struct {
	InUse    int64 `json:"in_use"`
	Capacity int64 `json:"capacity"`
	Queued   int64 `json:"queued"`
}

// usage reads the slots now.
func (b *bulkhead) usage() Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Usage{int64(b.inUse), int64(b.capacity), int64(len(b.waiters))}
}
