package orderdetail

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of Get that end the request without a page.
var (
	ErrOrderNotFound    = errors.New("order not found")   // the order service says so
	ErrOrderUnavailable = errors.New("order unavailable") // neither live nor cached
)

// ErrNotFound is what a fetch wraps when its service says the thing does
// not exist (HTTP 404), marked resilience.BadRequest: for the core it ends
// the request with ErrOrderNotFound, and it never counts against the
// dependency's health. A fetch's other errors are read by resilience.KindOf;
// anything unmarked is a failure of the dependency.
var ErrNotFound = errors.New("not found")

// LastGood is the last-good store: the newest live answer of each
// dependency for each order, served only when the dependency fails. Safe
// for concurrent use.
type LastGood interface {
	// Get returns the entry for (dep, orderID), honouring ctx's deadline. A
	// missing or expired entry is ErrCacheMiss, an unreadable one
	// ErrCacheCorrupt (which matches ErrCacheMiss); any other error is a
	// failure of the store.
	Get(ctx context.Context, dep, orderID string) (CacheEntry, error)
	// PutContext hands over a live answer without blocking, every time it
	// is live; the store skips a rewrite identical to what it holds and
	// never replaces an entry with an older one. ttl is how long the entry
	// may be served. ctx is the request's: the store may keep its values
	// (its trace) but must not let its end cancel the write.
	PutContext(ctx context.Context, dep, orderID string, e CacheEntry, ttl time.Duration)
}

// CacheEntry is one last-good answer: the section's JSON and when it was live.
type CacheEntry struct {
	AsOf    time.Time
	Payload []byte
}

// ErrCacheMiss means the store has no servable entry.
var ErrCacheMiss = errors.New("cache miss")

// ErrCacheCorrupt is the ErrCacheMiss of an entry the store cannot read (a
// value of another type or version, an impossible as_of, JSON that does
// not parse): counted apart, as a sign of tampering or of a bug.
var ErrCacheCorrupt = fmt.Errorf("%w: corrupt entry", ErrCacheMiss)

// Observer hears what no guard sees: last-good lookups. Telemetry
// implements it.
type Observer interface {
	// CacheLookup reports a last-good read for dep: outcome is "hit", or for
	// a miss "absent", "stale", "corrupt" or "error".
	CacheLookup(ctx context.Context, dep, outcome string)
}
