package cache

import (
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config sets up a Store. The zero value is valid: the in-memory store with
// the defaults below. A field at or below zero takes its default.
type Config struct {
	// URL of Redis (--redis-url), in a form the package documentation
	// lists; empty: the in-memory store.
	URL string
	// KeyPrefix starts every Redis key. Default DefaultKeyPrefix.
	KeyPrefix string
	// WriteQueue is how many entries may wait for a writer; beyond it
	// PutContext drops. Default DefaultWriteQueue.
	WriteQueue int
	// Writers is the number of goroutines writing batches. Default 2.
	Writers int
	// WriteTimeout bounds the round trip of one batch. Default 200ms.
	WriteTimeout time.Duration
	// MemoryEntries caps the in-memory store; beyond it the least recently
	// used entry goes. Default 20,000 (a few hundred bytes each).
	MemoryEntries int
}

const (
	DefaultKeyPrefix  = "orderagg:v1:lastgood"
	DefaultWriteQueue = 1024

	maxFutureSkew    = 5 * time.Second  // a stored as_of later than now+this is corrupt
	errorLogInterval = 10 * time.Second // the least time between two lines about failed writes
	recentEntries    = 65_536           // (dep, order) pairs whose stored copy is remembered
)

func (c Config) withDefaults() Config {
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	orDefault(&c.WriteQueue, DefaultWriteQueue)
	orDefault(&c.Writers, 2)
	orDefault(&c.WriteTimeout, 200*time.Millisecond)
	orDefault(&c.MemoryEntries, 20_000)
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
	tp       trace.TracerProvider
}

// WithListener sets the function told of every read and write outcome.
func WithListener(l Listener) Option { return func(o *options) { o.listener = l } }

// WithClock replaces time.Now: the in-memory store's TTLs, the future-skew
// check and the error log's rate read it.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithTracerProvider sets where the writers' "cache write" spans go;
// without it there are none.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tp = tp } }

func (o options) tracer() trace.Tracer {
	if o.tp == nil {
		o.tp = noop.NewTracerProvider()
	}
	return o.tp.Tracer("github.com/orderagg/orderagg/internal/cache")
}
