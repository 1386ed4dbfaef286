package cache

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of Config. A field at its zero value (or below it) takes these.
const (
	DefaultKeyPrefix        = "orderagg:v1:lastgood"
	DefaultWriteQueue       = 1024
	DefaultWriteTimeout     = 200 * time.Millisecond
	DefaultWriters          = 2
	DefaultMaxFutureSkew    = 5 * time.Second
	DefaultErrorLogInterval = 10 * time.Second

	DefaultPoolSize           = 64
	DefaultDialTimeout        = 200 * time.Millisecond
	DefaultSocketReadTimeout  = 100 * time.Millisecond
	DefaultSocketWriteTimeout = 100 * time.Millisecond
	defaultDialAttempts       = 1
)

// Config sets up a Store. The zero value is valid: an embedded, non-durable
// server with the defaults below. Every field at or below zero means its
// documented default, so a partly filled Config never disables a bound by
// accident.
type Config struct {
	// URL of the Redis deployment (the --redis-url flag); see the package
	// documentation for the forms accepted. Empty: an embedded in-process
	// server, which is fine for demos and tests and loses everything on exit.
	URL string

	// KeyPrefix starts every key: {KeyPrefix}:{dep}:{orderID}. Default
	// "orderagg:v1:lastgood". The "v1" is the key-space version: change it only
	// for an incompatible schema, since the old keys are then simply orphaned
	// until their TTL ends.
	KeyPrefix string

	// WriteQueue is how many entries may wait for a writer. Put drops (and
	// counts) an entry when the queue is full, so this bounds the memory a slow
	// Redis can pin. Default 1024: at 2 writers and a 1ms round trip it is
	// about half a second of backlog.
	WriteQueue int

	// WriteTimeout bounds one write, retries included. Writes happen after the
	// response has left, so this protects the writers, not the requests: a
	// frozen Redis costs each writer this much per entry, after which the queue
	// fills and Put starts dropping. Default 200ms.
	WriteTimeout time.Duration

	// Writers is the number of goroutines draining the queue. Default 2: one
	// write per response section is cheap, and a small count keeps a sick Redis
	// from being hammered.
	Writers int

	// MaxFutureSkew is how far in the future a stored as_of may be before the
	// value is treated as corrupt. It allows for clock differences between
	// instances while refusing to serve an entry that claims to be fresher
	// than anything could be. Default 5s.
	MaxFutureSkew time.Duration

	// ErrorLogInterval is the least time between two log lines about failed
	// writes; the ones in between are only counted (and reported in the next
	// line). Default 10s, so a Redis outage cannot flood the log.
	ErrorLogInterval time.Duration

	// Pool sets the connection pool shared by reads and writes.
	Pool PoolConfig
}

// PoolConfig sets go-redis's connection pool. Values given in the URL's
// query (pool_size, dial_timeout, read_timeout, write_timeout, max_retries)
// win over these.
type PoolConfig struct {
	// Size is the most connections per Redis node. Default 64: a read is
	// needed only when a dependency fails and lasts at most the cache guard's
	// few tens of milliseconds, so by Little's law 64 connections carry over a
	// thousand fallback reads a second next to the writers.
	Size int
	// DialTimeout bounds opening one connection. Default 200ms; a dial is
	// attempted once per command, never retried, because the caller's own
	// deadline is a few tens of milliseconds.
	DialTimeout time.Duration
	// ReadTimeout and WriteTimeout bound one socket read or write. Default
	// 100ms each. The request's context deadline is what really bounds a read
	// on the request path (the client is built with ContextTimeoutEnabled);
	// these are a backstop for calls whose context has no deadline.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// MaxRetries of a failed command. Default 0, none (go-redis's own default
	// is 3): a down Redis then fails at once and the caller falls back instead
	// of spending its few milliseconds on backoffs. go-redis checks idle
	// connections before reuse, so a retry rarely has anything to recover.
	MaxRetries int
}

// withDefaults returns c with every unset field at its default.
func (c Config) withDefaults() Config {
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.WriteQueue <= 0 {
		c.WriteQueue = DefaultWriteQueue
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.Writers <= 0 {
		c.Writers = DefaultWriters
	}
	if c.MaxFutureSkew <= 0 {
		c.MaxFutureSkew = DefaultMaxFutureSkew
	}
	if c.ErrorLogInterval <= 0 {
		c.ErrorLogInterval = DefaultErrorLogInterval
	}
	if c.Pool.Size <= 0 {
		c.Pool.Size = DefaultPoolSize
	}
	if c.Pool.DialTimeout <= 0 {
		c.Pool.DialTimeout = DefaultDialTimeout
	}
	if c.Pool.MaxRetries <= 0 {
		c.Pool.MaxRetries = -1 // go-redis's "none"; 0 would mean its default, 3
	}
	if c.Pool.ReadTimeout <= 0 {
		c.Pool.ReadTimeout = DefaultSocketReadTimeout
	}
	if c.Pool.WriteTimeout <= 0 {
		c.Pool.WriteTimeout = DefaultSocketWriteTimeout
	}
	return c
}

// Option changes how Open wires the Store; it carries collaborators rather
// than settings, which belong in Config.
type Option func(*options)

type options struct {
	hooks    []redis.Hook
	listener Listener
	now      func() time.Time
}

// WithHook adds a go-redis hook (tracing, metrics) to the client before it
// sends its first command, so the hook sees every command, the start-up probe
// included.
func WithHook(h redis.Hook) Option {
	return func(o *options) { o.hooks = append(o.hooks, h) }
}

// WithListener sets the function told of every read and write outcome; see
// Listener.
func WithListener(l Listener) Option {
	return func(o *options) { o.listener = l }
}

// withClock replaces time.Now for the checks that read the clock (the future
// skew of a stored as_of and the log rate limit). Tests use it.
func withClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// discardLogger is used when Open is given a nil logger.
var discardLogger = slog.New(slog.DiscardHandler)
