package orderdetail

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A dependency's fetch function (see NewSection and NewCore) is keyed by the
// order id alone, so that all calls of a page can start at the same instant.
// Its errors must be classified with the sentinels below (wrapped with %w)
// or with resilience.BadRequest, so that the guard and the fallbacks read
// them the same way: anything else counts as a failure of the dependency.

// ErrNotFound is returned by a client when the downstream says the thing does
// not exist (HTTP 404). For the order it ends the request with a 404; it never
// counts against the dependency's health.
var ErrNotFound = errors.New("not found")

// LastGood is the last-good store: the most recent live answer of each
// dependency for each order, used only when the dependency fails.
//
// Implementations must be safe for concurrent use.
type LastGood interface {
	// Get returns the newest entry for (dep, orderID). A missing or expired
	// entry is ErrCacheMiss, an undecodable one ErrCacheCorrupt (which
	// matches ErrCacheMiss); any other error is a failure of the store
	// itself. Get must honour ctx's deadline.
	Get(ctx context.Context, dep, orderID string) (CacheEntry, error)
	// PutContext hands an entry to the store without waiting: it must never
	// block the caller. An entry older than the one stored must not replace
	// it. ttl is how long the entry may be served. ctx is the request whose
	// answer the entry is: the store may keep its values (its trace, to link
	// the write to it) but must not let its end cancel the write.
	PutContext(ctx context.Context, dep, orderID string, e CacheEntry, ttl time.Duration)
}

// CacheEntry is one last-good answer: the section's JSON and when it was live.
type CacheEntry struct {
	AsOf    time.Time
	Payload []byte
}

// ErrCacheMiss means the store has no servable entry.
var ErrCacheMiss = errors.New("cache miss")

// ErrCacheCorrupt is the ErrCacheMiss of a store that found an entry it
// cannot read (a value of another type or version, an impossible as_of,
// JSON that does not parse): counted apart, as a sign of tampering or of a
// bug, rather than as an absent entry.
var ErrCacheCorrupt = fmt.Errorf("%w: corrupt entry", ErrCacheMiss)
