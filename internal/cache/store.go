package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"golang.org/x/time/rate"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// Config sets up a Store. The zero value is valid: the in-memory store with
// the defaults below; a field at or below zero takes its default.
type Config struct {
	URL           string        // --redis-url; empty: in process memory
	KeyPrefix     string        // starts every Redis key; default DefaultKeyPrefix
	WriteQueue    int           // entries waiting for a writer, beyond which PutContext drops; default DefaultWriteQueue
	Writers       int           // default 8
	WriteTimeout  time.Duration // bounds one write; default 200ms
	MemoryEntries int           // caps the in-memory store; default 20,000
}

const (
	DefaultKeyPrefix  = "orderagg:v1:lastgood"
	DefaultWriteQueue = 1024

	maxFutureSkew    = 5 * time.Second  // a stored as_of later than now+this is corrupt
	errorLogInterval = 10 * time.Second // the least time between two lines about failed writes
	recentEntries    = 65_536           // (dep, order) pairs whose stored copy is remembered
)

func (c Config) withDefaults() Config {
	c.KeyPrefix = cmp.Or(c.KeyPrefix, DefaultKeyPrefix)
	c.WriteQueue = positiveOr(c.WriteQueue, DefaultWriteQueue)
	c.Writers = positiveOr(c.Writers, 8)
	c.WriteTimeout = positiveOr(c.WriteTimeout, 200*time.Millisecond)
	c.MemoryEntries = positiveOr(c.MemoryEntries, 20_000)
	return c
}

func positiveOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Option passes Open a collaborator.
type Option func(*options)

type options struct {
	now func() time.Time
	tp  trace.TracerProvider
}

// WithClock replaces time.Now for the TTLs, the future-skew check and the
// error log's rate.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithTracerProvider sets where the "cache write" spans go; default none.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tp = tp } }

// Store is the last-good store with its write-behind queue, an
// orderdetail.LastGood. All methods are safe for concurrent use.
type Store struct {
	cfg    Config
	back   backend
	client redis.UniversalClient // nil for the in-memory store
	log    *slog.Logger
	tracer trace.Tracer
	now    func() time.Time
	counts struct {
		hits, misses, corrupt, readErrors, writesOK, writesStale, writesDropped, writeErrors atomic.Uint64
	}
	errLog        *rate.Limiter // lines about failed writes
	errSuppressed atomic.Uint64 // failed writes not logged since the last line

	recentMu sync.Mutex
	recent   *simplelru.LRU[entryKey, recentCopy]

	closeMu     sync.RWMutex // held for reading while queueing; Close takes it to close the queue
	closed      bool
	queue       chan writeReq
	pending     atomic.Int64 // entries accepted and not yet settled
	writeCtx    context.Context
	cancelWrite context.CancelFunc // when Close gives up draining
	writers     sync.WaitGroup
}

// Stats counts the outcomes since Open: one per Get, and one write outcome
// per entry PutContext accepted (not skipped as an identical rewrite).
type Stats struct {
	Hits, Misses, Corrupt, ReadErrors uint64 // Get returned an entry, none, one it cannot serve, or failed
	WritesOK, WritesStale             uint64 // a write stored its entry, or was refused: the stored as_of was as new or newer
	WritesDropped, WriteErrors        uint64 // PutContext dropped the entry (queue full, store closed), or its write failed
	Queued, QueueCapacity             int    // entries waiting for a writer now; Config.WriteQueue
}

// backend is Redis or process memory. get's found is false for no entry, a
// value it cannot serve is errCorrupt; put stores only a newer entry.
type backend interface {
	get(ctx context.Context, k entryKey, now time.Time) (e orderdetail.CacheEntry, found bool, err error)
	put(ctx context.Context, req writeReq, now time.Time) (stored bool, err error)
}

type entryKey struct{ dep, orderID string }

// writeReq is one accepted PutContext; link is the span of its request.
type writeReq struct {
	k    entryKey
	e    orderdetail.CacheEntry
	ttl  time.Duration
	sum  uint64 // digest of e.Payload
	link trace.SpanContext
}

// recentCopy is the newest as_of handed to the writers for a key and that
// copy's digest, confirmed once the store stored it.
type recentCopy struct {
	asOfUS    int64
	sum       uint64
	confirmed bool
}

var digestSeed = maphash.MakeSeed()

// Open returns the store cfg names and starts its writers. It fails only for
// an invalid URL or a done ctx; a Redis that does not answer a ping within
// 500ms is logged. A nil logger discards. The caller must Close the Store.
func Open(ctx context.Context, cfg Config, logger *slog.Logger, opts ...Option) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cache.open: %w", err)
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "cache")
	if cfg.URL == "" {
		logger.Warn("last-good cache is in process memory: not durable and not shared between instances; set --redis-url in production",
			"max_entries", cfg.MemoryEntries)
		return newStore(cfg, newMemory(cfg.MemoryEntries), nil, logger, opts), nil
	}
	client, err := newClient(cfg.URL)
	if err != nil {
		return nil, err
	}
	logging.Disable()          // go-redis logs every failed command; settle logs them rate-limited
	u, _ := url.Parse(cfg.URL) // newClient parsed it
	logger.Info("last-good cache on Redis", "url", u.Redacted())
	ping, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := client.Ping(ping).Err(); err != nil {
		logger.Warn("last-good cache failed its start-up ping; requests degrade without it until it answers", "error", err)
	}
	return newStore(cfg, &redisBackend{client: client, prefix: cfg.KeyPrefix, reads: newMemory(readReuseEntries)}, client, logger, opts), nil
}

func newStore(cfg Config, back backend, client redis.UniversalClient, logger *slog.Logger, opts []Option) *Store {
	o := options{now: time.Now, tp: noop.NewTracerProvider()}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Store{cfg: cfg, back: back, client: client, log: logger, tracer: o.tp.Tracer("github.com/orderagg/orderagg/internal/cache"), now: o.now,
		errLog: rate.NewLimiter(rate.Every(errorLogInterval), 1), queue: make(chan writeReq, cfg.WriteQueue)}
	s.recent, _ = simplelru.NewLRU[entryKey, recentCopy](recentEntries, nil)
	s.writeCtx, s.cancelWrite = context.WithCancel(context.Background())
	for range cfg.Writers {
		s.writers.Go(func() {
			for req := range s.queue {
				s.write(req)
			}
		})
	}
	return s
}

// Client is the go-redis client, for instrumentation; nil in memory.
func (s *Store) Client() redis.UniversalClient { return s.client }

// Get returns the entry for (dep, orderID) in at most one round trip bounded by ctx:
// orderdetail.ErrCacheMiss if none, ErrCacheCorrupt (a miss too) if it cannot
// be served; any other error is the store's, matching ctx.Err() if ctx ended.
func (s *Store) Get(ctx context.Context, dep, orderID string) (orderdetail.CacheEntry, error) {
	e, found, err := orderdetail.CacheEntry{}, false, ctx.Err()
	if err == nil {
		e, found, err = s.back.get(ctx, entryKey{dep, orderID}, s.now())
	}
	switch {
	case errors.Is(err, errCorrupt):
		s.counts.corrupt.Add(1)
		return e, orderdetail.ErrCacheCorrupt
	case err != nil:
		s.counts.readErrors.Add(1)
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err) // go-redis reports the socket deadline it set from ctx's
		}
		return e, fmt.Errorf("cache.get: %w", err)
	case !found:
		s.counts.misses.Add(1)
		return e, orderdetail.ErrCacheMiss
	}
	s.counts.hits.Add(1)
	return e, nil
}

// PutContext hands the entry to the writers and returns at once; the caller
// must not change e.Payload afterwards, and ctx serves only to link the
// write's span. It ignores a zero AsOf, an empty Payload or a ttl <= 0,
// skips a copy identical to the one confirmed stored less than ttl/4 before,
// and drops (counting it) an entry finding the queue full or the Store closed.
func (s *Store) PutContext(ctx context.Context, dep, orderID string, e orderdetail.CacheEntry, ttl time.Duration) {
	if ttl <= 0 || e.AsOf.IsZero() || len(e.Payload) == 0 {
		return
	}
	req := writeReq{k: entryKey{dep, orderID}, e: e, ttl: ttl, sum: maphash.Bytes(digestSeed, e.Payload), link: trace.SpanContextFromContext(ctx)}
	if !s.handOut(req) {
		return
	}
	s.pending.Add(1)
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if !s.closed {
		select {
		case s.queue <- req:
			return
		default:
		}
	}
	s.drop()
}

// handOut reports whether req must be written and, if so, marks it as the
// key's newest write in flight, unconfirmed.
func (s *Store) handOut(req writeReq) bool {
	asOf := req.e.AsOf.UnixMicro()
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	cur, ok := s.recent.Get(req.k)
	if ok && cur.confirmed && cur.sum == req.sum && asOf >= cur.asOfUS && asOf-cur.asOfUS < (req.ttl/4).Microseconds() {
		return false
	}
	if !ok || asOf > cur.asOfUS {
		s.recent.Add(req.k, recentCopy{asOfUS: asOf, sum: req.sum})
	}
	return true
}

// write stores one entry within WriteTimeout, in a trace linked to its
// request's, or drops it once Close has given up draining.
func (s *Store) write(req writeReq) {
	if s.writeCtx.Err() != nil {
		s.drop()
		return
	}
	ctx, cancel := context.WithTimeout(s.writeCtx, s.cfg.WriteTimeout)
	defer cancel()
	ctx, span := s.tracer.Start(ctx, "cache write", trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: req.link}))
	defer span.End()
	stored, err := s.back.put(ctx, req, s.now())
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	s.settle(req, stored, err)
}

// settle records one write's outcome. Only the key's newest write in flight
// marks its copy confirmed; a refused or failed one unmarks the key.
func (s *Store) settle(req writeReq, stored bool, err error) {
	defer s.pending.Add(-1)
	s.recentMu.Lock()
	if cur, ok := s.recent.Peek(req.k); ok && !cur.confirmed && cur.asOfUS == req.e.AsOf.UnixMicro() {
		if stored && err == nil {
			s.recent.Add(req.k, recentCopy{asOfUS: cur.asOfUS, sum: req.sum, confirmed: true})
		} else {
			s.recent.Remove(req.k)
		}
	}
	s.recentMu.Unlock()
	switch {
	case err != nil:
		s.counts.writeErrors.Add(1)
		if !s.errLog.AllowN(s.now(), 1) {
			s.errSuppressed.Add(1)
			return
		}
		s.log.Warn("last-good cache write failed; the next live answer writes it again, requests are unaffected",
			"dependency", req.k.dep, "order", req.k.orderID, "error", err, "suppressed_since_last", s.errSuppressed.Swap(0))
	case stored:
		s.counts.writesOK.Add(1)
	default:
		s.counts.writesStale.Add(1)
	}
}

// drop settles an accepted entry that is not written.
func (s *Store) drop() {
	s.counts.writesDropped.Add(1)
	s.pending.Add(-1)
}

// Stats returns the counts since Open and the queue's depth.
func (s *Store) Stats() Stats {
	c := &s.counts
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Corrupt: c.corrupt.Load(), ReadErrors: c.readErrors.Load(),
		WritesOK: c.writesOK.Load(), WritesStale: c.writesStale.Load(), WritesDropped: c.writesDropped.Load(), WriteErrors: c.writeErrors.Load(),
		Queued: len(s.queue), QueueCapacity: cap(s.queue)}
}

// Close stops taking entries, lets the writers drain the queue until ctx
// ends (the entries left are then dropped and counted, and the error
// matches ctx.Err()), and closes the client. A write in flight when ctx
// ends may hold Close up to WriteTimeout longer. Later calls return nil.
func (s *Store) Close(ctx context.Context) error {
	s.closeMu.Lock()
	already := s.closed
	s.closed = true
	s.closeMu.Unlock()
	if already {
		return nil
	}
	close(s.queue) // PutContext sends only under closeMu, seeing closed false
	stop := context.AfterFunc(ctx, s.cancelWrite)
	s.writers.Wait()
	var abandoned error
	if !stop() {
		abandoned = fmt.Errorf("cache.close: queued writes abandoned: %w", ctx.Err())
	}
	s.cancelWrite()
	if s.client == nil {
		return abandoned
	}
	if err := s.client.Close(); err != nil {
		return errors.Join(abandoned, fmt.Errorf("cache.close: %w", err))
	}
	return abandoned
}
