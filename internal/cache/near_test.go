package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// fakeStore is a LastGood in memory that counts its reads.
type fakeStore struct {
	mu      sync.Mutex
	m       map[string]orderdetail.CacheEntry
	gets    int
	puts    int
	ctxPuts int
	err     error // returned by Get when set
}

func newFakeStore() *fakeStore { return &fakeStore{m: map[string]orderdetail.CacheEntry{}} }

func (f *fakeStore) Get(_ context.Context, dep, id string) (orderdetail.CacheEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if f.err != nil {
		return orderdetail.CacheEntry{}, f.err
	}
	e, ok := f.m[dep+"/"+id]
	if !ok {
		return orderdetail.CacheEntry{}, orderdetail.ErrCacheMiss
	}
	return e, nil
}

func (f *fakeStore) Put(dep, id string, e orderdetail.CacheEntry, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts++
	if cur, ok := f.m[dep+"/"+id]; !ok || e.AsOf.After(cur.AsOf) {
		f.m[dep+"/"+id] = e
	}
}

func (f *fakeStore) reads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}

func (f *fakeStore) PutContext(_ context.Context, dep, id string, e orderdetail.CacheEntry, ttl time.Duration) {
	f.Put(dep, id, e, ttl)
}

// ctxStore is a fakeStore that keeps the context its last write came with.
type ctxStore struct {
	*fakeStore
	last context.Context
}

func (c *ctxStore) PutContext(ctx context.Context, dep, id string, e orderdetail.CacheEntry, ttl time.Duration) {
	c.mu.Lock()
	c.ctxPuts++
	c.last = ctx
	c.mu.Unlock()
	c.Put(dep, id, e, ttl)
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newNearForTest(next orderdetail.LastGood) (*Near, *fakeClock) {
	clk := &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	return NewNear(next, NearConfig{TTL: 2 * time.Second, Now: clk.now}), clk
}

func mustNearGet(t *testing.T, n *Near, dep, id string) orderdetail.CacheEntry {
	t.Helper()
	e, err := n.Get(context.Background(), dep, id)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", dep, id, err)
	}
	return e
}

func TestNearReusesAReadForItsTTL(t *testing.T) {
	st := newFakeStore()
	asOf := time.Date(2025, 3, 1, 11, 59, 0, 0, time.UTC)
	st.Put("logistics", "o-1", entry(asOf, `{"a":1}`), time.Minute)
	n, clk := newNearForTest(st)

	for range 3 {
		if got := mustNearGet(t, n, "logistics", "o-1"); string(got.Payload) != `{"a":1}` || !got.AsOf.Equal(asOf) {
			t.Fatalf("got %s at %v", got.Payload, got.AsOf)
		}
		clk.advance(500 * time.Millisecond)
	}
	if st.reads() != 1 {
		t.Fatalf("store read %d times within the TTL, want 1", st.reads())
	}
	// Another instance writes a newer entry: seen once the TTL is over.
	st.Put("logistics", "o-1", entry(asOf.Add(time.Second), `{"a":2}`), time.Minute)
	clk.advance(499 * time.Millisecond) // 1.999 s after the read
	if got := mustNearGet(t, n, "logistics", "o-1"); string(got.Payload) != `{"a":1}` {
		t.Fatalf("within the TTL: %s", got.Payload)
	}
	clk.advance(time.Millisecond) // 2 s: expired
	if got := mustNearGet(t, n, "logistics", "o-1"); string(got.Payload) != `{"a":2}` {
		t.Fatalf("after the TTL: %s, want the newer entry", got.Payload)
	}
	if st.reads() != 2 {
		t.Fatalf("store reads = %d, want 2", st.reads())
	}
	if s := n.Stats(); s.Hits != 3 || s.Reads != 2 {
		t.Fatalf("Stats = %+v", s)
	}
}

// A miss is not kept (the entry may be on its way through the write-behind
// queue), nor is a failure (the cache's guard must see each one).
func TestNearKeepsNoMissNorFailure(t *testing.T) {
	st := newFakeStore()
	n, _ := newNearForTest(st)
	ctx := context.Background()
	if _, err := n.Get(ctx, "coupon", "o-9"); !errors.Is(err, orderdetail.ErrCacheMiss) {
		t.Fatalf("err = %v, want ErrCacheMiss", err)
	}
	// The write lands in the store after the read: the next read sees it.
	st.Put("coupon", "o-9", entry(time.Now(), `{"items":[]}`), time.Minute)
	if got := mustNearGet(t, n, "coupon", "o-9"); string(got.Payload) != `{"items":[]}` {
		t.Fatalf("got %s", got.Payload)
	}
	boom := errors.New("redis down")
	st.err = boom
	for range 2 {
		if _, err := n.Get(ctx, "coupon", "o-8"); !errors.Is(err, boom) {
			t.Fatalf("err = %v, want the store's failure", err)
		}
	}
	if st.reads() != 4 {
		t.Fatalf("store reads = %d, want every read passed on (4)", st.reads())
	}
}

func TestNearNewestWins(t *testing.T) {
	st := newFakeStore()
	t0 := time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC)
	st.Put("inventory", "o-1", entry(t0, `"t0"`), time.Minute)
	n, _ := newNearForTest(st)
	mustNearGet(t, n, "inventory", "o-1")

	n.PutContext(context.Background(), "inventory", "o-1", entry(t0.Add(time.Second), `"t1"`), time.Minute)
	if got := mustNearGet(t, n, "inventory", "o-1"); string(got.Payload) != `"t1"` {
		t.Fatalf("after a newer Put: %s", got.Payload)
	}
	n.PutContext(context.Background(), "inventory", "o-1", entry(t0.Add(-time.Second), `"older"`), time.Minute)
	n.PutContext(context.Background(), "inventory", "o-1", entry(t0.Add(time.Second), `"equal"`), time.Minute)
	if got := mustNearGet(t, n, "inventory", "o-1"); string(got.Payload) != `"t1"` {
		t.Fatalf("an older or equal Put replaced the kept entry: %s", got.Payload)
	}

	// A Put for an order nobody read here adds nothing (memory is for reads).
	n.PutContext(context.Background(), "inventory", "o-2", entry(t0, `"live"`), time.Minute)
	if _, err := n.Get(context.Background(), "inventory", "o-2"); err != nil {
		t.Fatal(err)
	}
	// Unservable entries are ignored here as by the store.
	n.PutContext(context.Background(), "inventory", "o-2", entry(t0.Add(time.Hour), ``), time.Minute)
	n.PutContext(context.Background(), "inventory", "o-2", entry(t0.Add(time.Hour), `"no ttl"`), 0)
	if got := mustNearGet(t, n, "inventory", "o-2"); string(got.Payload) != `"live"` {
		t.Fatalf("an unservable Put replaced the entry: %s", got.Payload)
	}
	// Puts still reach the store, and do not fill the near cache.
	before := n.Len()
	n.PutContext(context.Background(), "inventory", "o-3", entry(t0, `"x"`), time.Minute)
	if n.Len() != before {
		t.Fatal("a Put added an entry nobody read")
	}
	if st.puts != 8 {
		t.Fatalf("store got %d puts, want 8", st.puts)
	}
}

// A slower read must not replace what a newer Put left.
func TestNearReadDoesNotUndoANewerPut(t *testing.T) {
	st := newFakeStore()
	t0 := time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC)
	n, _ := newNearForTest(st)
	k := nearKey{"order", "o-1"}
	s := n.shard(k)
	n.keep(s, k, nearEntry{e: entry(t0.Add(time.Second), `"put"`), read: n.now()})
	n.keep(s, k, nearEntry{e: entry(t0, `"slow read"`), read: n.now()})
	if got := mustNearGet(t, n, "order", "o-1"); string(got.Payload) != `"put"` {
		t.Fatalf("got %s", got.Payload)
	}
}

func TestNearIsBounded(t *testing.T) {
	st := newFakeStore()
	clk := &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	n := NewNear(st, NearConfig{TTL: time.Second, MaxEntries: 64, Now: clk.now})
	for i := range 5000 {
		_, _ = n.Get(context.Background(), "logistics", fmt.Sprintf("o-%d", i))
		if i%100 == 0 {
			clk.advance(300 * time.Millisecond)
		}
	}
	if got := n.Len(); got > 64 {
		t.Fatalf("Len = %d, want at most 64", got)
	}
}

func TestNearPassesTheContextOn(t *testing.T) {
	type key struct{}
	st := &ctxStore{fakeStore: newFakeStore()}
	n, _ := newNearForTest(st)
	ctx := context.WithValue(context.Background(), key{}, "request")
	n.PutContext(ctx, "order", "o-1", entry(time.Now(), `{}`), time.Minute)
	if st.ctxPuts != 1 || st.puts != 1 || st.last.Value(key{}) != "request" {
		t.Fatalf("ctxPuts %d, puts %d: the request's context did not reach the store", st.ctxPuts, st.puts)
	}
}

// In front of the real store, corrupt values stay misses and entries come
// back as written.
func TestNearInFrontOfTheStore(t *testing.T) {
	s := mustOpen(t, Config{})
	n := NewNear(s, NearConfig{})
	ctx := context.Background()
	asOf := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	n.PutContext(context.Background(), "logistics", "o-1", entry(asOf, `{"status":"IN_TRANSIT"}`), time.Minute)
	mustFlush(t, s)
	for range 2 {
		e, err := n.Get(ctx, "logistics", "o-1")
		if err != nil || string(e.Payload) != `{"status":"IN_TRANSIT"}` || !e.AsOf.Equal(asOf) {
			t.Fatalf("Get = %s at %v, %v", e.Payload, e.AsOf, err)
		}
	}
	if err := s.Client().Set(ctx, key(DefaultKeyPrefix, "logistics", "o-2"), "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := n.Get(ctx, "logistics", "o-2"); !errors.Is(err, orderdetail.ErrCacheMiss) {
			t.Fatalf("corrupt value: err = %v", err)
		}
	}
	if st := s.Stats(); st.Hits != 1 || st.Corrupt != 2 {
		t.Fatalf("store Stats = %+v, want one hit kept and both corrupt reads passed on", st)
	}
}
