package orderdetail

import (
	"hash/maphash"
	"sync"
	"time"
)

// writeThrottle decides which live answers are written to the last-good
// store. A popular order is answered many times a second; rewriting its
// identical sections each time would only load Redis. So a section of an
// order is considered at most once per interval (due), and then written only
// if its content differs from the last copy written, or that copy is getting
// old (changed): an unchanged answer is rewritten once its copy is
// refreshAfter old, to move its as_of on before it nears the section's max
// age, and to write again a copy the store lost.
//
// The cost is that a cached entry's as_of may trail the latest live answer:
// by up to the interval when the content changed, by up to refreshAfter
// when it did not — still an honest "this was live at as_of", and the copy
// stays servable for at least max age − refreshAfter into an outage.
//
// State is kept per order, one slot per section, so that a page costs one
// hash and one map lookup: a lookup per section was ~1 µs each under load
// (the floor scenario; the maps are cold in the cache by the time an order
// comes back).
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
	last map[uint64][]throttleEntry // by order; one entry per section
}

// throttleEntry is what the throttle remembers of one section of an order.
type throttleEntry struct {
	checked time.Time // the last time it was due
	written time.Time // when the last copy handed to the store was live
	sum     uint64    // that copy's content hash; 0 before the first
}

// throttleShardCap is the orders a shard remembers (16 shards: 32,768
// orders, under 8 MiB with four sections).
const throttleShardCap = 2048

// maxThrottledSections is how many sections due can report on: one bit each.
const maxThrottledSections = 64

// unchangedRefresh divides a section's max age into the age at which an
// unchanged copy is rewritten anyway (never more often than the interval,
// never less often than maxUnchangedRefresh): inventory (1 min) every 15 s,
// coupons, logistics and the order every minute.
const unchangedRefresh = 4

// maxUnchangedRefresh bounds how long an unchanged answer goes unwritten.
// The throttle records a copy as written when it hands it to the store,
// which writes behind and may still lose it (Redis down, a full queue): a
// lost copy is written again at most this much later, not a quarter of a
// day later for the order.
const maxUnchangedRefresh = time.Minute

func newWriteThrottle(interval time.Duration) *writeThrottle {
	if interval <= 0 {
		return nil
	}
	return &writeThrottle{interval: interval, seed: maphash.MakeSeed()}
}

// refreshAfter is the age at which an unchanged copy of a section whose
// max age is maxAge is rewritten.
func (t *writeThrottle) refreshAfter(maxAge time.Duration) time.Duration {
	if t == nil {
		return 0
	}
	return max(t.interval, min(maxAge/unchangedRefresh, maxUnchangedRefresh))
}

// due reports which sections of order id may be considered for a write:
// bit i stands for section i, live at liveAt[i] (a zero time: not live,
// never due). It records the due ones as checked; key identifies the order
// for changed. A nil throttle lets every live section through.
func (t *writeThrottle) due(id string, liveAt []time.Time) (key uint64, due uint64) {
	if t == nil {
		for i, at := range liveAt {
			if !at.IsZero() {
				due |= 1 << i
			}
		}
		return 0, due
	}
	key = maphash.String(t.seed, id)
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	es := s.entries(key, len(liveAt))
	for i, at := range liveAt {
		if at.IsZero() || (!es[i].checked.IsZero() && at.Sub(es[i].checked) < t.interval) {
			continue
		}
		es[i].checked = at
		due |= 1 << i
	}
	return key, due
}

// changed reports whether payload, section's answer live at now, should be
// written for the order key came from: its content differs from the last
// copy written, or that copy is refreshAfter old. If so it records payload
// as written. A nil throttle lets everything through.
func (t *writeThrottle) changed(key uint64, section int, payload []byte, now time.Time, refreshAfter time.Duration) bool {
	if t == nil {
		return true
	}
	sum := maphash.Bytes(t.seed, payload) | 1 // never 0, which means "none yet"
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &s.entries(key, section+1)[section] // forgotten since due: written as if new
	if e.sum == sum && now.Sub(e.written) < refreshAfter {
		return false
	}
	e.sum, e.written = sum, now
	if e.checked.IsZero() {
		e.checked = now
	}
	return true
}

// entries returns the order's slots, at least n of them, making them (and
// the shard's map, forgetting the rest when it is full) if need be. Call it
// with s.mu held.
func (s *throttleShard) entries(key uint64, n int) []throttleEntry {
	es, ok := s.last[key]
	if ok && len(es) >= n {
		return es
	}
	if s.last == nil || (!ok && len(s.last) >= throttleShardCap) {
		s.last = make(map[uint64][]throttleEntry)
	}
	grown := make([]throttleEntry, n)
	copy(grown, es)
	s.last[key] = grown
	return grown
}

func (t *writeThrottle) shard(key uint64) *throttleShard {
	return &t.shards[key%uint64(len(t.shards))]
}
