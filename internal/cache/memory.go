package cache

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// memory is the in-process store: at most Config.MemoryEntries entries, the
// least recently used going first. An entry past its ttl is a miss, removed
// when read; until then it takes a place, so the cap holds whatever the ttls.
type memory struct {
	mu      sync.Mutex
	entries *simplelru.LRU[entryKey, memEntry]
}

type memEntry struct {
	e       orderdetail.CacheEntry
	expires time.Time
}

func newMemory(maxEntries int) *memory {
	entries, _ := simplelru.NewLRU[entryKey, memEntry](maxEntries, nil) // fails only for a size <= 0
	return &memory{entries: entries}
}

func (m *memory) get(_ context.Context, k entryKey, now time.Time) (orderdetail.CacheEntry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.entries.Get(k)
	if ok && !now.Before(cur.expires) {
		m.entries.Remove(k)
		ok = false
	}
	return cur.e, ok, nil
}

func (m *memory) write(_ context.Context, batch []writeReq, now time.Time, settle func(writeReq, bool, error)) {
	stored := make([]bool, len(batch))
	m.mu.Lock()
	for i, req := range batch {
		e := orderdetail.CacheEntry{AsOf: req.e.AsOf.Truncate(time.Microsecond).UTC(), Payload: req.e.Payload} // as in Redis
		if cur, ok := m.entries.Peek(req.k); !ok || !now.Before(cur.expires) || e.AsOf.After(cur.e.AsOf) {
			m.entries.Add(req.k, memEntry{e: e, expires: now.Add(req.ttl)})
			stored[i] = true
		}
	}
	m.mu.Unlock()
	for i, req := range batch {
		settle(req, stored[i], nil)
	}
}

func (m *memory) close() error { return nil }
