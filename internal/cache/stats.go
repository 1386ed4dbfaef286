package cache

import "sync/atomic"

// Event is one outcome of a read or a write, as counted by Stats and told to
// a Listener.
type Event uint8

const (
	// EventHit: Get returned an entry.
	EventHit Event = iota
	// EventMiss: Get found nothing (absent or expired).
	EventMiss
	// EventCorrupt: Get found a value it cannot serve (undecodable, unknown
	// version, as_of too far in the future, wrong Redis type). Get returned
	// ErrCacheCorrupt, which matches ErrCacheMiss.
	EventCorrupt
	// EventReadError: Get failed for another reason (unreachable, timeout).
	EventReadError
	// EventWriteOK: a write replaced the stored value.
	EventWriteOK
	// EventWriteStale: a write was skipped because the stored value was as
	// new or newer.
	EventWriteStale
	// EventWriteDropped: Put dropped the entry because the queue was full or
	// the store was closing.
	EventWriteDropped
	// EventWriteError: a write failed or timed out.
	EventWriteError

	numEvents
)

var eventNames = [numEvents]string{
	EventHit:          "hit",
	EventMiss:         "miss",
	EventCorrupt:      "corrupt",
	EventReadError:    "read_error",
	EventWriteOK:      "write_ok",
	EventWriteStale:   "write_stale",
	EventWriteDropped: "write_dropped",
	EventWriteError:   "write_error",
}

// String is the event's snake_case name, fit for a metric attribute.
func (e Event) String() string {
	if e < numEvents {
		return eventNames[e]
	}
	return "unknown"
}

// Listener is told of every event with the dependency it concerns, so that
// telemetry can count them without this package importing OpenTelemetry.
// It runs synchronously on the caller's goroutine — Get's, Put's or a
// writer's — so it must be fast and must not block; it must be safe for
// concurrent use.
type Listener func(ev Event, dep string)

// Stats is a snapshot of the store's counters since Open. The read counters
// are exclusive: Hits+Misses+Corrupt+ReadErrors is the number of Get calls.
// Every Put that was not ignored (see Store.Put) ends as exactly one of the
// write counters, once its write is done.
type Stats struct {
	Hits       uint64 // reads that returned an entry
	Misses     uint64 // reads of an absent or expired key
	Corrupt    uint64 // reads of a value that could not be served
	ReadErrors uint64 // reads that failed (store unreachable, timeout)

	WritesOK      uint64 // writes that replaced the stored value
	WritesStale   uint64 // writes skipped: the stored as_of was as new or newer
	WritesDropped uint64 // entries dropped by Put: queue full or store closed
	WriteErrors   uint64 // writes that failed or timed out

	Queued        int // entries waiting for a writer now
	QueueCapacity int // Config.WriteQueue
}

// counters are the atomic totals behind Stats, one per Event.
type counters [numEvents]atomic.Uint64

func (c *counters) snapshot() Stats {
	return Stats{
		Hits:          c[EventHit].Load(),
		Misses:        c[EventMiss].Load(),
		Corrupt:       c[EventCorrupt].Load(),
		ReadErrors:    c[EventReadError].Load(),
		WritesOK:      c[EventWriteOK].Load(),
		WritesStale:   c[EventWriteStale].Load(),
		WritesDropped: c[EventWriteDropped].Load(),
		WriteErrors:   c[EventWriteError].Load(),
	}
}
