package orderdetail

import (
	"hash/maphash"
	"sync"
	"time"
)

// writeThrottle lets a (dependency, order) pair be written to the last-good
// store at most once per interval. A popular order is answered many times a
// second; rewriting its identical sections each time would only load Redis.
// The cost is that a cached entry's as_of may trail the latest live answer by
// up to the interval — still an honest "this was live at as_of".
//
// Memory is bounded: each shard forgets everything when it grows past its
// cap, which at worst lets a few extra writes through.
type writeThrottle struct {
	interval time.Duration
	seed     maphash.Seed
	shards   [16]throttleShard
}

type throttleShard struct {
	mu   sync.Mutex
	last map[uint64]time.Time
}

const throttleShardCap = 8192

func newWriteThrottle(interval time.Duration) *writeThrottle {
	if interval <= 0 {
		return nil
	}
	return &writeThrottle{interval: interval, seed: maphash.MakeSeed()}
}

// allow reports whether (dep, id) may be written at now, and if so records it.
// A nil throttle allows everything.
func (t *writeThrottle) allow(dep, id string, now time.Time) bool {
	if t == nil {
		return true
	}
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(dep)
	h.WriteByte(0)
	h.WriteString(id)
	k := h.Sum64()
	s := &t.shards[k%uint64(len(t.shards))]
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.last[k]; ok && now.Sub(last) < t.interval {
		return false
	}
	if s.last == nil || len(s.last) >= throttleShardCap {
		s.last = make(map[uint64]time.Time)
	}
	s.last[k] = now
	return true
}
