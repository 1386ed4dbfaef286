package resilience

import "sync"

// bulkhead caps the calls in flight; a full one rejects at once. A slot is
// held until the guarded function has really returned, so work still
// unwinding after a timeout keeps counting: the cap limits real work, not
// waiting callers.
type bulkhead struct {
	mu       sync.Mutex
	inUse    int
	capacity int
}

// tryAcquire takes a free slot, if there is one.
func (b *bulkhead) tryAcquire() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inUse >= b.capacity {
		return false
	}
	b.inUse++
	return true
}

func (b *bulkhead) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inUse--
}

// resize sets the capacity; calls beyond a smaller one finish as they are.
func (b *bulkhead) resize(capacity int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.capacity = capacity
}

// Usage is a bulkhead's slots at one instant. Queued is always 0: there is
// no wait queue.
type Usage struct {
	InUse    int64 `json:"in_use"`
	Capacity int64 `json:"capacity"`
	Queued   int64 `json:"queued"`
}

func (b *bulkhead) usage() Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Usage{InUse: int64(b.inUse), Capacity: int64(b.capacity)}
}
