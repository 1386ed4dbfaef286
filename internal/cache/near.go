package cache

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// Defaults of NearConfig.
const (
	// DefaultNearTTL is how long a read is reused. A last-good read happens
	// only when the dependency failed; while its breaker is open every page
	// of a popular order reads the same entry, and 2 s turns those reads
	// into one per order every 2 s. It is also the longest a newer entry
	// written by another instance can go unseen here.
	DefaultNearTTL = 2 * time.Second
	// DefaultNearEntries bounds the memory: at a few hundred bytes of
	// payload an entry, 16,384 entries is a few MiB.
	DefaultNearEntries = 16384
)

// NearConfig sets up a Near cache. Zero fields take the defaults above.
type NearConfig struct {
	TTL        time.Duration
	MaxEntries int
	Now        func() time.Time // default time.Now; tests inject a clock
}

// Near is a bounded in-process cache of last-good reads in front of
// another store (the Redis one). It exists for the pages of a dependency
// whose breaker is open: each such page needs that dependency's last good
// answer, and without Near each reads Redis, so a degraded page cost more
// than a healthy one (issue #17).
//
// What it keeps: each entry a read found, for TTL after the read. A miss
// (absent, expired or corrupt) is not kept: the entry may be on its way
// (this instance's write-behind queue, or another instance), and a kept miss
// would hide it for the TTL. A store failure is not kept either, so the
// cache's guard still sees every failure. Reads only ever happen after a
// failure, so Near only holds entries of dependencies that are failing.
//
// Newest-wins holds within the instance: a Put of a newer entry replaces
// the kept one (an older one never does) and still goes to the store. A
// newer entry written by another instance is seen at the next read of the
// store, at most TTL later. The age a page shows is computed from the
// entry's as_of when it is served, so it stays exact whatever Near holds.
//
// The payloads of the entries returned are shared between the callers:
// they must not be modified (the aggregation only decodes them).
type Near struct {
	next orderdetail.LastGood
	ttl  time.Duration
	now  func() time.Time
	seed maphash.Seed
	cap  int // entries per shard

	shards [nearShards]nearShard
	hits   atomic.Uint64
	reads  atomic.Uint64
}

var _ orderdetail.LastGood = (*Near)(nil)

const nearShards = 16

type nearShard struct {
	mu    sync.Mutex
	m     map[nearKey]nearEntry
	swept time.Time // last sweep for expired entries
}

type nearKey struct{ dep, orderID string }

type nearEntry struct {
	e    orderdetail.CacheEntry
	read time.Time // when the store was read
}

// NewNear puts a Near cache in front of next.
func NewNear(next orderdetail.LastGood, cfg NearConfig) *Near {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultNearTTL
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultNearEntries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	n := &Near{next: next, ttl: cfg.TTL, now: cfg.Now, seed: maphash.MakeSeed(),
		cap: max(1, cfg.MaxEntries/nearShards)}
	for i := range n.shards {
		n.shards[i].m = map[nearKey]nearEntry{}
	}
	return n
}

func (n *Near) shard(k nearKey) *nearShard {
	var h maphash.Hash
	h.SetSeed(n.seed)
	h.WriteString(k.dep)
	h.WriteByte(0)
	h.WriteString(k.orderID)
	return &n.shards[h.Sum64()%nearShards]
}

// Get returns what a read of the store returned less than TTL ago, or
// reads the store.
func (n *Near) Get(ctx context.Context, dep, orderID string) (orderdetail.CacheEntry, error) {
	k := nearKey{dep, orderID}
	s := n.shard(k)
	now := n.now()
	s.mu.Lock()
	ent, ok := s.m[k]
	s.mu.Unlock()
	if ok && now.Sub(ent.read) < n.ttl && !now.Before(ent.read) {
		n.hits.Add(1)
		return ent.e, nil
	}
	n.reads.Add(1)
	e, err := n.next.Get(ctx, dep, orderID)
	if err == nil {
		n.keep(s, k, nearEntry{e: e, read: now})
	}
	return e, err
}

// keep stores ent unless a newer entry got there first (a Put, or a later
// read), making room by dropping expired entries, or else any one.
func (n *Near) keep(s *nearShard, k nearKey, ent nearEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.m[k]; ok && cur.e.AsOf.After(ent.e.AsOf) && ent.read.Sub(cur.read) < n.ttl {
		// What this read found is older than what is kept (written here
		// since, or read by a slower concurrent Get): keep the newer one.
		return
	}
	if _, ok := s.m[k]; !ok && len(s.m) >= n.cap {
		// A sweep is O(cap): at most one per half TTL, so a shard full of
		// fresh entries (more distinct reads than fit) costs O(1) a read.
		if ent.read.Sub(s.swept) >= n.ttl/2 {
			s.swept = ent.read
			for key, e := range s.m {
				if ent.read.Sub(e.read) >= n.ttl {
					delete(s.m, key)
				}
			}
		}
		if len(s.m) >= n.cap {
			for key := range s.m { // Go picks a random one
				delete(s.m, key)
				break
			}
		}
	}
	s.m[k] = ent
}

// PutContext hands the entry to the store with the request's context (its
// span links the write to the request) and, if this instance keeps an older
// read of it, replaces that: a page served from here never goes back to an
// answer older than one this instance has seen live.
func (n *Near) PutContext(ctx context.Context, dep, orderID string, e orderdetail.CacheEntry, ttl time.Duration) {
	n.next.PutContext(ctx, dep, orderID, e, ttl)
	n.refresh(dep, orderID, e, ttl)
}

func (n *Near) refresh(dep, orderID string, e orderdetail.CacheEntry, ttl time.Duration) {
	if ttl <= 0 || e.AsOf.IsZero() || len(e.Payload) == 0 {
		return // unservable: the store ignores it too
	}
	k := nearKey{dep, orderID}
	s := n.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[k]
	if !ok || !e.AsOf.After(cur.e.AsOf) {
		return
	}
	// The read time stays: the entry is refreshed from the store on
	// schedule, in case another instance has a newer one still.
	s.m[k] = nearEntry{e: e, read: cur.read}
}

// NearStats are a Near cache's counters since NewNear.
type NearStats struct {
	Hits  uint64 // Gets answered from memory
	Reads uint64 // Gets passed to the store
}

// Stats returns the counters.
func (n *Near) Stats() NearStats {
	return NearStats{Hits: n.hits.Load(), Reads: n.reads.Load()}
}

// Len is how many reads are kept, expired ones not yet dropped included.
func (n *Near) Len() int {
	total := 0
	for i := range n.shards {
		s := &n.shards[i]
		s.mu.Lock()
		total += len(s.m)
		s.mu.Unlock()
	}
	return total
}
