package cache

import "time"

// Config sets up a Store. The zero value is valid: the in-memory store with
// the defaults below. A field at or below zero takes its default.
type Config struct {
	// URL of Redis (--redis-url), in a form the package documentation
	// lists; empty: the in-memory store.
	URL string
	// KeyPrefix starts every Redis key. Default "orderagg:v1:lastgood".
	KeyPrefix string
	// WriteQueue is how many entries may wait for a writer; beyond it
	// PutContext drops. Default 1024.
	WriteQueue int
	// Writers is the number of goroutines writing batches. Default 2.
	Writers int
	// WriteTimeout bounds the round trip of one batch. Default 200ms.
	WriteTimeout time.Duration
	// MaxFutureSkew is how far past now a stored as_of may be before the
	// value is corrupt. Default 5s.
	MaxFutureSkew time.Duration
	// ErrorLogInterval is the least time between two log lines about failed
	// writes; the ones between are counted in the next. Default 10s.
	ErrorLogInterval time.Duration
	// MemoryEntries caps the in-memory store; beyond it the least recently
	// used entry goes. Default 20,000 (a few hundred bytes each).
	MemoryEntries int
	// RecentEntries caps the (dep, order) pairs whose stored copy the Store
	// remembers to skip identical rewrites; a pair forgotten is rewritten
	// by its next live answer. Default 65,536.
	RecentEntries int
}

// Defaults of Config.
const (
	DefaultKeyPrefix        = "orderagg:v1:lastgood"
	DefaultWriteQueue       = 1024
	DefaultWriters          = 2
	DefaultWriteTimeout     = 200 * time.Millisecond
	DefaultMaxFutureSkew    = 5 * time.Second
	DefaultErrorLogInterval = 10 * time.Second
	DefaultMemoryEntries    = 20_000
	DefaultRecentEntries    = 65_536
)

func (c Config) withDefaults() Config {
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	orDefault(&c.WriteQueue, DefaultWriteQueue)
	orDefault(&c.Writers, DefaultWriters)
	orDefault(&c.WriteTimeout, DefaultWriteTimeout)
	orDefault(&c.MaxFutureSkew, DefaultMaxFutureSkew)
	orDefault(&c.ErrorLogInterval, DefaultErrorLogInterval)
	orDefault(&c.MemoryEntries, DefaultMemoryEntries)
	orDefault(&c.RecentEntries, DefaultRecentEntries)
	return c
}

func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Option passes Open a collaborator.
type Option func(*options)

type options struct {
	listener Listener
	now      func() time.Time
}

// WithListener sets the function told of every read and write outcome.
func WithListener(l Listener) Option { return func(o *options) { o.listener = l } }

// WithClock replaces time.Now: the in-memory store's TTLs, the future-skew
// check and the error log's rate read it.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }
