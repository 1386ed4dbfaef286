package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// redisBackend keeps the entries in Redis, in the schema of the package
// documentation.
type redisBackend struct {
	client redis.UniversalClient
	prefix string
	skew   time.Duration
}

func (r *redisBackend) get(ctx context.Context, k entryKey, now time.Time) (orderdetail.CacheEntry, bool, error) {
	vals, err := r.client.HMGet(context.WithValue(ctx, readKey{}, k.dep), k.redisKey(r.prefix), hashFields...).Result()
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		return orderdetail.CacheEntry{}, true, errCorrupt
	} else if err != nil {
		return orderdetail.CacheEntry{}, false, err
	}
	return decode(vals, now.Add(r.skew))
}

// write sends the batch as one pipeline of putScript calls or, on Redis
// Cluster, one pipeline per master side by side: go-redis fails a whole
// cluster pipeline with the error of its slowest node, which would count
// writes that other masters stored as lost.
func (r *redisBackend) write(ctx context.Context, batch []writeReq, now time.Time, settle func(writeReq, bool, error)) {
	limit := now.Add(r.skew).UnixMicro()
	if cc, ok := r.client.(*redis.ClusterClient); ok && len(batch) > 1 {
		groups := map[*redis.Client][]writeReq{}
		for _, req := range batch {
			m, _ := cc.MasterForKey(ctx, req.k.redisKey(r.prefix)) // nil on error: a group of its own
			groups[m] = append(groups[m], req)
		}
		if len(groups) > 1 {
			var wg sync.WaitGroup
			for _, g := range groups {
				wg.Go(func() { r.pipeline(ctx, g, limit, settle) })
			}
			wg.Wait()
			return
		}
	}
	r.pipeline(ctx, batch, limit, settle)
}

func (r *redisBackend) pipeline(ctx context.Context, batch []writeReq, limit int64, settle func(writeReq, bool, error)) {
	keys := make([]string, len(batch))
	cmds := make([]*redis.Cmd, len(batch))
	args := func(req writeReq) []any {
		ttlMillis := int64((req.ttl + time.Millisecond - 1) / time.Millisecond) // rounded up
		return []any{valueVersion, req.e.AsOf.UnixMicro(), req.e.Payload, ttlMillis, limit}
	}
	_, perr := r.client.Pipelined(withOrigins(ctx, batch), func(p redis.Pipeliner) error {
		for i, req := range batch {
			keys[i] = req.k.redisKey(r.prefix)
			cmds[i] = putScript.EvalSha(ctx, p, keys[i:i+1], args(req)...)
		}
		return nil
	})
	for i, req := range batch {
		n, err := result(cmds[i], perr)
		if redis.HasErrorPrefix(err, "NOSCRIPT") { // a restarted node forgot the script: send it whole
			n, err = putScript.Run(withOrigins(ctx, batch[i:i+1]), r.client, keys[i:i+1], args(req)...).Int()
		}
		settle(req, err == nil && n == 1, err)
	}
}

// result is one pipelined command's outcome. A pipeline that failed before
// its commands were answered (a refused AUTH, a dial error) leaves them with
// neither reply nor error: they failed with the pipeline's error.
func result(cmd *redis.Cmd, pipelineErr error) (int, error) {
	if cmd.Err() == nil && cmd.Val() == nil {
		if pipelineErr == nil {
			pipelineErr = errNoReply
		}
		return 0, pipelineErr
	}
	return cmd.Int()
}

var errNoReply = errors.New("cache: no reply from Redis")

func (r *redisBackend) close() error { return r.client.Close() }

type readKey struct{}

type originsKey struct{}

// ReadFor reports the dependency whose last-good entry the command with this
// context reads, or "". It is for go-redis hooks.
func ReadFor(ctx context.Context) string {
	dep, _ := ctx.Value(readKey{}).(string)
	return dep
}

// WriteOrigins reports the contexts of the requests whose answers the write
// command (or pipeline) with this context stores. It is for go-redis hooks.
func WriteOrigins(ctx context.Context) []context.Context {
	o, _ := ctx.Value(originsKey{}).([]context.Context)
	return o
}

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

// clientLog carries go-redis's own lines (a failed dial, one per command
// during an outage) to the debug level: the Store's rate-limited warnings
// already tell the operator.
type clientLog struct{ log *slog.Logger }

func (c clientLog) Printf(ctx context.Context, format string, v ...any) {
	c.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}
