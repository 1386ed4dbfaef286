package cache

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// The in-memory store keeps at most MemoryEntries entries, the least
// recently used going first.
func TestMemoryEvictsLeastRecentlyUsed(t *testing.T) {
	s := mustOpen(t, Config{MemoryEntries: 3})
	now := time.Now()
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		put(s, "order", id, entry(now, `{}`), time.Minute)
		mustFlush(t, s) // writers run in parallel: one entry at a time fixes the order of use
	}
	mustGet(t, s, "order", "o-1") // o-2 is now the least recently used
	put(s, "order", "o-4", entry(now, `{}`), time.Minute)
	mustFlush(t, s)
	for id, want := range map[string]bool{"o-1": true, "o-2": false, "o-3": true, "o-4": true} {
		_, err := s.Get(context.Background(), "order", id)
		if found := err == nil; found != want || (err != nil && !errors.Is(err, orderdetail.ErrCacheMiss)) {
			t.Errorf("%s: err %v, want found %v", id, err, want)
		}
	}
}

// memoryBound is what 200,000 distinct orders (four sections each, 400-byte
// sections) may add to the heap of a process running the in-memory store
// with the default caps: 20,000 entries and 65,536 remembered copies.
const memoryBound = 48 << 20

// TestMemoryStaysBounded: every distinct id asked for writes four entries;
// 200,000 of them leave the live heap, measured after a GC, within
// memoryBound, and the newest are served.
func TestMemoryStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 800,000 entries")
	}
	before := heapAfterGC()
	s := mustOpen(t, Config{WriteQueue: 4096}) // room for the 4,000 entries between two flushes
	now := time.Now()
	body := `","b":"` + strings.Repeat("x", 380) + `"}`
	const ids = 200_000
	for i := range ids {
		id := "o-" + strconv.Itoa(i)
		for _, dep := range []string{"order", "inventory", "coupon", "logistics"} {
			put(s, dep, id, entry(now, `{"id":"`+id+body), 24*time.Hour)
		}
		if i%1000 == 999 {
			mustFlush(t, s) // keep the queue from dropping: every entry is stored
		}
	}
	mustFlush(t, s)
	grown := heapAfterGC() - before
	t.Logf("heap grew %.1f MiB for %d ids; stats %+v", float64(grown)/(1<<20), ids, s.Stats())
	if grown > memoryBound {
		t.Errorf("heap grew %d MiB, bound %d MiB", grown>>20, memoryBound>>20)
	}
	if st := s.Stats(); st.WritesOK != 4*ids || st.WritesDropped != 0 {
		t.Errorf("Stats = %+v, want every entry written", st)
	}
	mustGet(t, s, "logistics", "o-"+strconv.Itoa(ids-1))
	runtime.KeepAlive(s)
}

func heapAfterGC() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
