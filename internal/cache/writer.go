package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxBatch bounds how many queued entries one round trip carries. Writes
// are pipelined: at thousands of live sections a second, one round trip per
// entry would leave the writers behind and the queue dropping.
const maxBatch = 64

// runWriter writes queued entries until Close, then empties the queue unless
// Close has given up on it. The Store owns it: Close waits for it.
func (s *Store) runWriter() {
	defer s.writers.Done()
	batch := make([]writeReq, 0, maxBatch)
	for {
		select {
		case req := <-s.queue:
			s.writeBatch(s.fill(append(batch[:0], req)))
		case <-s.draining:
			for s.writeCtx.Err() == nil {
				select {
				case req := <-s.queue:
					s.writeBatch(s.fill(append(batch[:0], req)))
				default:
					return
				}
			}
			return
		}
	}
}

// fill adds whatever else is already queued, up to maxBatch, without waiting.
func (s *Store) fill(batch []writeReq) []writeReq {
	for len(batch) < maxBatch {
		select {
		case req := <-s.queue:
			batch = append(batch, req)
		default:
			return batch
		}
	}
	return batch
}

// writeBatch stores entries with the newest-wins script in one pipelined
// round trip, within WriteTimeout. Failures are counted and logged at a
// bounded rate; no request ever sees them.
func (s *Store) writeBatch(batch []writeReq) {
	ctx, cancel := context.WithTimeout(s.writeCtx, s.cfg.WriteTimeout)
	defer cancel()
	// On Redis Cluster, one pipeline per master, run side by side: go-redis's
	// cluster pipeline waits out an unreachable master and then stamps every
	// command of the batch with the context's error, those another master has
	// already stored included — good writes would be counted as lost.
	if cc, ok := s.client.(*redis.ClusterClient); ok && len(batch) > 1 {
		groups := map[*redis.Client][]writeReq{}
		for _, req := range batch {
			m, _ := cc.MasterForKey(ctx, key(s.cfg.KeyPrefix, req.dep, req.orderID)) // nil on error: one group of its own
			groups[m] = append(groups[m], req)
		}
		if len(groups) > 1 {
			var wg sync.WaitGroup
			for _, g := range groups {
				wg.Go(func() { s.writeGroup(ctx, g) })
			}
			wg.Wait()
			return
		}
	}
	s.writeGroup(ctx, batch)
}

// writeGroup is writeBatch's round trip for entries of one Redis node (or a
// single-node or Sentinel deployment).
func (s *Store) writeGroup(ctx context.Context, batch []writeReq) {
	limit := s.now().Add(s.cfg.MaxFutureSkew).UnixMicro()
	keys := make([][]string, len(batch))
	cmds := make([]*redis.Cmd, len(batch))
	_, perr := s.client.Pipelined(withOrigins(ctx, batch), func(p redis.Pipeliner) error {
		for i, req := range batch {
			keys[i] = []string{key(s.cfg.KeyPrefix, req.dep, req.orderID)}
			cmds[i] = putScript.EvalSha(ctx, p, keys[i], valueVersionArg, req.asOfUS, req.payload, req.ttlMS, limit)
		}
		return nil
	})
	for i, req := range batch {
		stored, err := result(cmds[i], perr)
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// A restarted (or new cluster) node has forgotten the script:
			// Run sends it in full and it is cached again from then on.
			stored, err = putScript.Run(withOrigins(ctx, batch[i:i+1]), s.client, keys[i], valueVersionArg, req.asOfUS, req.payload, req.ttlMS, limit).Int()
		}
		s.settle(req, keys[i][0], stored, err)
	}
}

// result is one pipelined command's outcome. A pipeline that failed before
// its commands were answered (a connection whose AUTH was refused, a dial
// error) leaves them with neither a reply nor an error, and reading one
// would report go-redis's "unexpected type=<nil>" instead of the cause:
// such a command failed with the pipeline's error.
func result(cmd *redis.Cmd, pipelineErr error) (int, error) {
	if cmd.Err() == nil && cmd.Val() == nil {
		if pipelineErr == nil {
			pipelineErr = errNoReply
		}
		return 0, pipelineErr
	}
	return cmd.Int()
}

// errNoReply is a command that was neither answered nor failed: not
// something go-redis does, but a write must never count as stored on it.
var errNoReply = errors.New("cache: no reply from Redis")

type originsKey struct{}

// withOrigins hands the requests that produced batch to the client hooks
// of its round trip, so a trace can link the write to them.
func withOrigins(ctx context.Context, batch []writeReq) context.Context {
	var origins []context.Context
	for _, req := range batch {
		if req.origin != nil {
			origins = append(origins, req.origin)
		}
	}
	if origins == nil {
		return ctx
	}
	return context.WithValue(ctx, originsKey{}, origins)
}

// WriteOrigins reports the contexts of the requests whose answers a write
// command (or pipeline) with this context stores; none for other commands.
// It is for go-redis hooks.
func WriteOrigins(ctx context.Context) []context.Context {
	o, _ := ctx.Value(originsKey{}).([]context.Context)
	return o
}

// settle counts one entry's outcome. Done after the outcome is counted, so
// Flush returns with Stats final.
func (s *Store) settle(req writeReq, k string, stored int, err error) {
	defer s.finishOne()
	switch {
	case err != nil:
		s.record(EventWriteError, req.dep)
		if ok, suppressed := s.errLog.allow(s.now()); ok {
			s.log.Warn("last-good cache write failed; the entry is lost, requests are unaffected",
				"key", k, "error", err, "suppressed_since_last", suppressed)
		}
	case stored == 1:
		s.record(EventWriteOK, req.dep)
	default:
		s.record(EventWriteStale, req.dep)
	}
}

// logLimiter lets one log line through per interval and counts the others,
// so an outage costs one line every few seconds instead of one per write.
type logLimiter struct {
	every      time.Duration
	last       atomic.Int64 // Unix nanoseconds of the last line let through; 0 for none
	suppressed atomic.Uint64
}

// allow reports whether a line may be logged at now and, if so, how many
// were held back since the last one.
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed uint64) {
	n := now.UnixNano()
	last := l.last.Load()
	if (last != 0 && n-last < int64(l.every)) || !l.last.CompareAndSwap(last, n) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
