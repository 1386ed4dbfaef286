package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// ErrClosed is returned by Flush once Close has begun.
var ErrClosed = errors.New("cache: store closed")

// Store is the last-good store on Redis with a write-behind queue. It
// implements orderdetail.LastGood. All methods are safe for concurrent use.
type Store struct {
	cfg      Config
	client   redis.UniversalClient
	topology Topology
	emb      *embedded // nil unless the server is in-process
	log      *slog.Logger
	listener Listener
	now      func() time.Time

	queue    chan writeReq
	draining chan struct{} // closed by Close: writers empty the queue and exit
	// writeCtx is the writers' lifetime, not a request's: Close cancels it
	// when its own ctx ends before the queue is drained, which stops the
	// drain and the writes still waiting for a connection. (go-redis bounds
	// socket I/O by deadlines only, so a write blocked on the socket ends at
	// its WriteTimeout.)
	writeCtx    context.Context
	cancelWrite context.CancelFunc
	writers     sync.WaitGroup
	closed      atomic.Bool
	closeOnce   sync.Once
	closeErr    error

	// pending counts entries accepted by Put and not yet written (queued or
	// in flight). idle is closed, and reset to nil, when pending drops to
	// zero while someone waits in Flush; nil when nobody waits, so the write
	// path allocates nothing for Flush.
	pending atomic.Int64
	idleMu  sync.Mutex
	idle    chan struct{}

	counts counters
	errLog logLimiter
}

var _ orderdetail.LastGood = (*Store)(nil)

// writeReq is one queued Put. The key is built by the writer, not by Put, so
// that Put allocates nothing.
type writeReq struct {
	// origin is the context of the request whose answer this is, or nil;
	// only its values are used (the trace it belongs to), never its
	// cancellation: the write outlives the request on purpose.
	origin       context.Context
	dep, orderID string
	asOfUS       int64
	payload      []byte
	ttlMS        int64
}

// Open connects to the Redis named by cfg.URL or, when it is empty, starts
// an embedded server, and starts the writers. It fails only for an invalid
// URL, an embedded server that cannot listen, or a ctx already done: an
// unreachable Redis is logged, and the client connects when it is next
// needed, so the service starts (and degrades to semantic defaults) while
// Redis is down. ctx bounds the start-up probe (at most twice the dial
// timeout). A nil logger discards. Open routes go-redis's process-wide log
// output to logger. The caller must Close the Store.
func Open(ctx context.Context, cfg Config, logger *slog.Logger, opts ...Option) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cache.open: %w", err)
	}
	cfg = cfg.withDefaults()
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if logger == nil {
		logger = discardLogger
	}
	logger = logger.With("component", "cache")
	routeClientLogs(logger, cfg.ErrorLogInterval, o.now)

	var emb *embedded
	rawURL := cfg.URL
	if rawURL == "" {
		var err error
		if emb, err = startEmbedded(); err != nil {
			return nil, err
		}
		rawURL = "redis://" + emb.addr()
	}
	spec, err := parseURL(rawURL, cfg.Pool)
	if err != nil {
		if emb != nil {
			emb.close()
		}
		return nil, err
	}
	client := spec.newFn()
	for _, h := range o.hooks {
		client.AddHook(h)
	}

	s := &Store{
		cfg:      cfg,
		client:   client,
		topology: spec.topology,
		emb:      emb,
		log:      logger,
		listener: o.listener,
		now:      o.now,
		queue:    make(chan writeReq, cfg.WriteQueue),
		draining: make(chan struct{}),
		errLog:   logLimiter{every: cfg.ErrorLogInterval},
	}
	if emb != nil {
		s.topology = TopologyEmbedded
		logger.Warn("last-good cache is an embedded in-process server: not durable and not shared between instances; set --redis-url in production",
			"addr", emb.addr())
	} else {
		logger.Info("last-good cache configured",
			"url", RedactURL(cfg.URL), "topology", string(spec.topology), "addrs", describeAddrs(spec.addrs))
	}
	s.probe(ctx)

	s.writeCtx, s.cancelWrite = context.WithCancel(context.Background())
	s.writers.Add(cfg.Writers)
	for range cfg.Writers {
		go s.runWriter()
	}
	return s, nil
}

// probe pings once so that an operator sees at start-up whether Redis
// answers. Failure is only logged: the store works without Redis.
func (s *Store) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*s.cfg.Pool.DialTimeout)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		s.log.Warn("last-good cache failed its start-up ping; requests degrade without it until it answers",
			"error", err)
	}
}

// Client is the underlying go-redis client, for instrumentation (such as
// go-redis's OpenTelemetry hooks) and diagnostics. Commands sent through it
// bypass the store's counters.
func (s *Store) Client() redis.UniversalClient { return s.client }

// Topology is the kind of deployment the store talks to.
func (s *Store) Topology() Topology { return s.topology }

// Ping checks that Redis answers, within ctx.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cache.ping: %w", err)
	}
	return nil
}

// Get returns the newest entry for (dep, orderID) in one round trip bounded
// by ctx. An absent or expired key is orderdetail.ErrCacheMiss; a value
// that cannot be served (undecodable, unknown version, as_of more than
// MaxFutureSkew ahead) is orderdetail.ErrCacheCorrupt, which matches
// ErrCacheMiss, and is counted as Corrupt. Any other
// failure is returned wrapped; when ctx ended it also matches ctx.Err().
func (s *Store) Get(ctx context.Context, dep, orderID string) (orderdetail.CacheEntry, error) {
	k := key(s.cfg.KeyPrefix, dep, orderID)
	if err := ctx.Err(); err != nil {
		s.record(EventReadError, dep)
		return orderdetail.CacheEntry{}, fmt.Errorf("cache.get: %s: %w", k, err)
	}
	vals, err := s.client.HMGet(withRead(ctx, dep), k, fieldVersion, fieldAsOf, fieldPayload).Result()
	if err != nil {
		if isWrongType(err) {
			s.record(EventCorrupt, dep)
			return orderdetail.CacheEntry{}, orderdetail.ErrCacheCorrupt
		}
		s.record(EventReadError, dep)
		if cerr := contextErr(ctx); cerr != nil {
			// go-redis reports the socket deadline, not the context: say both
			// so that the caller can tell a timeout with errors.Is.
			return orderdetail.CacheEntry{}, fmt.Errorf("cache.get: %s: %w: %w", k, cerr, err)
		}
		return orderdetail.CacheEntry{}, fmt.Errorf("cache.get: %s: %w", k, err)
	}
	e, found, err := decode(vals, s.now(), s.cfg.MaxFutureSkew)
	switch {
	case err != nil:
		s.record(EventCorrupt, dep)
		return orderdetail.CacheEntry{}, orderdetail.ErrCacheCorrupt
	case !found:
		s.record(EventMiss, dep)
		return orderdetail.CacheEntry{}, orderdetail.ErrCacheMiss
	}
	s.record(EventHit, dep)
	return e, nil
}

type readKey struct{}

// withRead marks a command's context as the last-good read for dep, so that
// client hooks (tracing) can tell which fallback the read serves.
func withRead(ctx context.Context, dep string) context.Context {
	return context.WithValue(ctx, readKey{}, dep)
}

// ReadFor reports the dependency whose last-good answer the command with
// this context reads, or "" for any other command. It is for go-redis hooks.
func ReadFor(ctx context.Context) string {
	dep, _ := ctx.Value(readKey{}).(string)
	return dep
}

// contextErr is ctx.Err(), or DeadlineExceeded once the deadline has passed
// even if ctx's timer has not fired yet: go-redis sets the socket deadline
// to ctx's, so its timeout can be seen a moment before ctx.Err() is set.
func contextErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// isWrongType reports Redis's refusal to read a key of another type: someone
// stored something else there, which for us is a corrupt value.
func isWrongType(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE")
}

// Put queues the entry for a writer and returns at once. When the queue is
// full, or the store is closing, the entry is dropped and counted: the cache
// is a fallback, and a request must never wait for it. Put keeps e.Payload
// without copying it, so the caller must not change it afterwards. An entry
// with a zero AsOf, an empty Payload or a ttl <= 0 cannot be served and is
// ignored. Whether it is stored is decided in Redis: newest as_of wins.
func (s *Store) Put(dep, orderID string, e orderdetail.CacheEntry, ttl time.Duration) {
	if req, ok := newWriteReq(dep, orderID, e, ttl); ok {
		s.enqueue(req)
	}
}

// PutContext is Put for a caller that has the request's context: the
// batched write that stores the entry is then linked to the request's
// trace (see WriteOrigins). ctx's cancellation has no effect on the write.
func (s *Store) PutContext(ctx context.Context, dep, orderID string, e orderdetail.CacheEntry, ttl time.Duration) {
	if req, ok := newWriteReq(dep, orderID, e, ttl); ok {
		req.origin = ctx
		s.enqueue(req)
	}
}

// newWriteReq is the queued form of an entry, or false for one that cannot
// be served (see Put). It has no origin: Put has no request to link to.
func newWriteReq(dep, orderID string, e orderdetail.CacheEntry, ttl time.Duration) (writeReq, bool) {
	if ttl <= 0 || e.AsOf.IsZero() || len(e.Payload) == 0 {
		return writeReq{}, false
	}
	return writeReq{
		dep:     dep,
		orderID: orderID,
		asOfUS:  e.AsOf.UnixMicro(),
		payload: e.Payload,
		ttlMS:   int64((ttl + time.Millisecond - 1) / time.Millisecond),
	}, true
}

// enqueue hands req to a writer, or drops and counts it when the queue is
// full or the store is closing.
func (s *Store) enqueue(req writeReq) {
	// Counted before the send, so that a writer can never finish it first
	// and let Flush see zero while it is still queued.
	s.pending.Add(1)
	if !s.closed.Load() {
		select {
		case s.queue <- req:
			return
		default:
		}
	}
	s.record(EventWriteDropped, req.dep)
	s.finishOne()
}

// Flush waits until every entry Put has accepted so far is written (or has
// failed), or ctx ends. It is for tests and for an orderly shutdown; it
// returns ErrClosed once Close has begun (Close drains the queue itself).
func (s *Store) Flush(ctx context.Context) error {
	for {
		// Take the channel before reading pending: a drop to zero after the
		// read closes this very channel (or a newer one, only after closing
		// this), so the wake-up cannot be missed.
		s.idleMu.Lock()
		if s.idle == nil {
			s.idle = make(chan struct{})
		}
		idle := s.idle
		s.idleMu.Unlock()
		if s.pending.Load() == 0 {
			return nil
		}
		if s.closed.Load() {
			return ErrClosed
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("cache.flush: %w", ctx.Err())
		}
	}
}

// finishOne marks one accepted entry as done and wakes Flush at zero.
func (s *Store) finishOne() {
	if s.pending.Add(-1) == 0 {
		s.wakeFlush()
	}
}

func (s *Store) wakeFlush() {
	s.idleMu.Lock()
	if s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.idleMu.Unlock()
}

// Stats returns the counters since Open.
func (s *Store) Stats() Stats {
	st := s.counts.snapshot()
	st.Queued = len(s.queue)
	st.QueueCapacity = cap(s.queue)
	return st
}

// record counts ev and tells the listener.
func (s *Store) record(ev Event, dep string) {
	s.counts[ev].Add(1)
	if s.listener != nil {
		s.listener(ev, dep)
	}
}

// Close stops taking entries, lets the writers drain the queue until ctx
// ends (then drops, counting them, the entries left), waits for the
// writers, closes the client and stops the embedded server. A write in
// flight when ctx ends may hold Close up to WriteTimeout longer. It returns
// an error matching ctx.Err() when entries were abandoned. Entries Put
// concurrently with Close may be discarded uncounted. Calls after the first
// return the first one's result.
func (s *Store) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown(ctx) })
	return s.closeErr
}

func (s *Store) shutdown(ctx context.Context) error {
	s.closed.Store(true)
	close(s.draining)

	// This helper exits as soon as the writers have, which the code below
	// always waits for.
	done := make(chan struct{})
	go func() {
		s.writers.Wait()
		close(done)
	}()
	var errs []error
	select {
	case <-done:
	case <-ctx.Done():
		s.cancelWrite()
		<-done
		errs = append(errs, fmt.Errorf("cache.close: queued writes abandoned: %w", ctx.Err()))
	}
	s.cancelWrite()

	for drained := false; !drained; {
		select {
		case req := <-s.queue:
			s.record(EventWriteDropped, req.dep)
			s.finishOne()
		default:
			drained = true
		}
	}
	s.wakeFlush()

	if err := s.client.Close(); err != nil {
		errs = append(errs, fmt.Errorf("cache.close: client: %w", err))
	}
	if s.emb != nil {
		s.emb.close()
	}
	return errors.Join(errs...)
}
