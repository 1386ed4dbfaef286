package resilience

import (
	"context"
	"slices"
	"sync"
	"time"
)

// bulkhead caps the calls in flight to one dependency. A slot is held until
// the guarded function has really returned, so work still unwinding after
// a timeout keeps counting: the cap limits real work, not waiting callers.
type bulkhead struct {
	mu       sync.Mutex
	inUse    int
	capacity int
	waiters  []chan struct{} // first in, first served; closing one hands it a slot
}

// tryAcquire takes a free slot, if there is one, without waiting.
func (b *bulkhead) tryAcquire() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inUse < b.capacity {
		b.inUse++
		return true
	}
	return false
}

// acquire takes a slot, waiting in the queue (if cfg has one) for at most
// wait. It returns KindSuccess with a slot, KindRejected when the bulkhead
// and its queue are full or the wait ran out, KindDeadline when ctx ended.
func (b *bulkhead) acquire(ctx context.Context, cfg *BulkheadConfig, wait time.Duration, clock Clock) Kind {
	b.mu.Lock()
	if b.inUse < b.capacity {
		b.inUse++
		b.mu.Unlock()
		return KindSuccess
	}
	if len(b.waiters) >= cfg.MaxQueue || wait <= 0 {
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
	defer b.mu.Unlock()
	if i := slices.Index(b.waiters, ch); i >= 0 {
		b.waiters = slices.Delete(b.waiters, i, i+1)
	} else {
		b.releaseLocked() // handed a slot as it gave up: pass it on
	}
	return kind
}

func (b *bulkhead) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseLocked()
}

// releaseLocked frees a slot, or hands it to the first waiter while the
// bulkhead is within its capacity. b.mu held.
func (b *bulkhead) releaseLocked() {
	if len(b.waiters) > 0 && b.inUse <= b.capacity {
		close(b.waiters[0])
		b.waiters = b.waiters[1:]
		return
	}
	b.inUse--
}

// resize sets the capacity; calls beyond a smaller one finish as they are,
// and a larger one serves the queue at once.
func (b *bulkhead) resize(capacity int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.capacity = capacity
	for len(b.waiters) > 0 && b.inUse < b.capacity {
		b.inUse++
		close(b.waiters[0])
		b.waiters = b.waiters[1:]
	}
}

// usage is the slots in use, the capacity and the calls queued.
func (b *bulkhead) usage() (inUse, capacity, queued int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse, b.capacity, len(b.waiters)
}
