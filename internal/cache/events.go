package cache

// Event is one outcome of a read or a write.
type Event uint8

const (
	EventHit          Event = iota // Get returned an entry
	EventMiss                      // Get found none (absent or expired)
	EventCorrupt                   // Get found one it cannot serve: ErrCacheCorrupt
	EventReadError                 // Get failed (store unreachable, timeout)
	EventWriteOK                   // a write replaced the stored entry
	EventWriteStale                // a write was refused: the stored as_of was as new or newer
	EventWriteDropped              // PutContext dropped the entry: queue full or store closed
	EventWriteError                // a write failed or timed out
	numEvents
)

var eventNames = [...]string{"hit", "miss", "corrupt", "read_error", "write_ok", "write_stale", "write_dropped", "write_error", "unknown"}

// String is the event's snake_case name.
func (e Event) String() string { return eventNames[min(e, numEvents)] }

// Listener is told of every event and its dependency, synchronously on the
// goroutine of Get, PutContext or a writer: it must be fast, must not block,
// and must be safe for concurrent use.
type Listener func(ev Event, dep string)

// Stats counts the events since Open. Hits+Misses+Corrupt+ReadErrors is the
// number of Get calls; every entry PutContext accepted (not skipped as an
// identical rewrite) ends as one write outcome once settled.
type Stats struct {
	Hits, Misses, Corrupt, ReadErrors                 uint64
	WritesOK, WritesStale, WritesDropped, WriteErrors uint64
	Queued, QueueCapacity                             int // entries waiting for a writer now; Config.WriteQueue
}

// Stats returns the event counts since Open and the queue's depth.
func (s *Store) Stats() Stats {
	c := &s.counts
	return Stats{
		Hits: c[EventHit].Load(), Misses: c[EventMiss].Load(), Corrupt: c[EventCorrupt].Load(), ReadErrors: c[EventReadError].Load(),
		WritesOK: c[EventWriteOK].Load(), WritesStale: c[EventWriteStale].Load(),
		WritesDropped: c[EventWriteDropped].Load(), WriteErrors: c[EventWriteError].Load(),
		Queued: len(s.queue), QueueCapacity: cap(s.queue),
	}
}
