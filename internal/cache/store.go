package cache

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// ErrClosed is returned by Flush once Close has begun.
var ErrClosed = errors.New("cache: store closed")

// Store is the last-good store with its write-behind queue. It implements
// orderdetail.LastGood; all methods are safe for concurrent use.
type Store struct {
	cfg      Config
	back     backend
	client   redis.UniversalClient // nil for the in-memory store
	log      *slog.Logger
	listener Listener
	tracer   trace.Tracer
	now      func() time.Time
	counts   [numEvents]atomic.Uint64

	recentMu sync.Mutex
	recent   *simplelru.LRU[entryKey, recentCopy]

	queue       chan writeReq
	pending     atomic.Int64  // entries accepted and not yet settled
	draining    chan struct{} // closed by Close: the writers empty the queue and exit
	writeCtx    context.Context
	cancelWrite context.CancelFunc // ends the writes when Close gives up draining
	writers     sync.WaitGroup
	closed      atomic.Bool
	closeOnce   sync.Once
	closeErr    error

	errLog        *rate.Limiter
	errSuppressed atomic.Uint64
}

var _ orderdetail.LastGood = (*Store)(nil)

// backend is where entries live: Redis or process memory.
type backend interface {
	// get reads one entry; found is false when there is none; a value that
	// cannot be served is errCorrupt.
	get(ctx context.Context, k entryKey, now time.Time) (e orderdetail.CacheEntry, found bool, err error)
	// write stores each entry of the batch only if it is newer than the
	// stored one, and tells settle its outcome: stored, refused or failed.
	write(ctx context.Context, batch []writeReq, now time.Time, settle func(req writeReq, stored bool, err error))
	close() error
}

// writeReq is one accepted PutContext; link is the span of its request.
type writeReq struct {
	k    entryKey
	e    orderdetail.CacheEntry
	ttl  time.Duration
	sum  uint64 // digest of e.Payload
	link trace.SpanContext
}

// recentCopy is what the Store knows of one key's stored copy: the newest
// as_of handed to the writers and, once confirmed, that copy's digest.
type recentCopy struct {
	asOfUS    int64
	sum       uint64
	confirmed bool
}

var digestSeed = maphash.MakeSeed()

// Open returns the store cfg names and starts its writers. It fails only for
// an invalid URL or a done ctx; a Redis that does not answer a ping within
// 500ms (or ctx) is logged, and requests degrade until it answers. A nil
// logger discards. The caller must Close the Store.
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
	redis.SetLogger(clientLog{logger})
	logger.Info("last-good cache on Redis", "url", redactURL(cfg.URL))
	ping, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := client.Ping(ping).Err(); err != nil {
		logger.Warn("last-good cache failed its start-up ping; requests degrade without it until it answers", "error", err)
	}
	return newStore(cfg, &redisBackend{client: client, prefix: cfg.KeyPrefix}, client, logger, opts), nil
}

func newStore(cfg Config, back backend, client redis.UniversalClient, logger *slog.Logger, opts []Option) *Store {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Store{cfg: cfg, back: back, client: client, log: logger, listener: o.listener, tracer: o.tracer(), now: o.now,
		queue: make(chan writeReq, cfg.WriteQueue), draining: make(chan struct{}), errLog: rate.NewLimiter(rate.Every(errorLogInterval), 1)}
	s.recent, _ = simplelru.NewLRU[entryKey, recentCopy](recentEntries, nil)
	s.writeCtx, s.cancelWrite = context.WithCancel(context.Background())
	for range cfg.Writers {
		s.writers.Go(s.runWriter)
	}
	return s
}

// Client is the go-redis client, for instrumentation (redisotel); nil for
// the in-memory store. Commands sent through it bypass the Store's events.
func (s *Store) Client() redis.UniversalClient { return s.client }

// Get returns the newest entry for (dep, orderID) in one round trip bounded
// by ctx. None is orderdetail.ErrCacheMiss; one that cannot be served is
// orderdetail.ErrCacheCorrupt (which matches ErrCacheMiss). Any other error
// is the store's failure, matching ctx.Err() when ctx ended.
func (s *Store) Get(ctx context.Context, dep, orderID string) (orderdetail.CacheEntry, error) {
	e, found, err := orderdetail.CacheEntry{}, false, ctx.Err()
	if err == nil {
		e, found, err = s.back.get(ctx, entryKey{dep, orderID}, s.now())
	}
	switch {
	case errors.Is(err, errCorrupt):
		s.record(EventCorrupt, dep)
		return e, orderdetail.ErrCacheCorrupt
	case err != nil:
		s.record(EventReadError, dep)
		cerr := ctx.Err()
		if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
			cerr = context.DeadlineExceeded // go-redis reports the socket deadline it set from ctx's
		}
		if cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return e, fmt.Errorf("cache.get: %w", err)
	case !found:
		s.record(EventMiss, dep)
		return e, orderdetail.ErrCacheMiss
	}
	s.record(EventHit, dep)
	return e, nil
}

// PutContext hands the entry to the writers and returns at once; the caller
// must not change e.Payload afterwards. ctx serves only for its span, which
// the write's span links to. It skips an entry identical to the copy last
// confirmed stored while that copy is younger than ttl/4, ignores one that
// cannot be served (zero AsOf, empty Payload, ttl <= 0), and drops (counting
// it) one that finds the queue full or the Store closed.
func (s *Store) PutContext(ctx context.Context, dep, orderID string, e orderdetail.CacheEntry, ttl time.Duration) {
	if ttl <= 0 || e.AsOf.IsZero() || len(e.Payload) == 0 {
		return
	}
	req := writeReq{k: entryKey{dep, orderID}, e: e, ttl: ttl, sum: maphash.Bytes(digestSeed, e.Payload), link: trace.SpanContextFromContext(ctx)}
	if !s.handOut(req) {
		return
	}
	s.pending.Add(1)
	if !s.closed.Load() {
		select {
		case s.queue <- req:
			return
		default:
		}
	}
	s.drop(req)
}

// handOut reports whether req must be written and, if so, marks it as the
// key's newest write in flight: unconfirmed, so that an identical answer
// after it is written too until the store confirms.
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
		s.record(EventWriteError, req.k.dep)
		if !s.errLog.AllowN(s.now(), 1) {
			s.errSuppressed.Add(1)
			return
		}
		s.log.Warn("last-good cache write failed; the next live answer writes it again, requests are unaffected",
			"dependency", req.k.dep, "order", req.k.orderID, "error", err, "suppressed_since_last", s.errSuppressed.Swap(0))
	case stored:
		s.record(EventWriteOK, req.k.dep)
	default:
		s.record(EventWriteStale, req.k.dep)
	}
}

// drop settles an accepted entry that will not be written. Its key stays
// unconfirmed, so the next answer is written.
func (s *Store) drop(req writeReq) {
	s.record(EventWriteDropped, req.k.dep)
	s.pending.Add(-1)
}

func (s *Store) record(ev Event, dep string) {
	s.counts[ev].Add(1)
	if s.listener != nil {
		s.listener(ev, dep)
	}
}

// Flush waits until every entry accepted so far has settled, or ctx ends;
// ErrClosed once Close has begun (Close drains itself).
func (s *Store) Flush(ctx context.Context) error {
	for s.pending.Load() > 0 || s.closed.Load() {
		if s.closed.Load() {
			return ErrClosed
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cache.flush: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// Close stops taking entries, lets the writers drain the queue until ctx
// ends (the entries left are then dropped and counted, and the error
// matches ctx.Err()), and closes the client. A write in flight when ctx
// ends may hold Close up to WriteTimeout longer. Later calls return the
// first one's result.
func (s *Store) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.draining)
		stop := context.AfterFunc(ctx, s.cancelWrite)
		s.writers.Wait()
		var errs []error
		if !stop() {
			errs = append(errs, fmt.Errorf("cache.close: queued writes abandoned: %w", ctx.Err()))
		}
		s.cancelWrite()
		for len(s.queue) > 0 {
			s.drop(<-s.queue)
		}
		if err := s.back.close(); err != nil {
			errs = append(errs, fmt.Errorf("cache.close: %w", err))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
