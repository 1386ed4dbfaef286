package cache

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
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
}

func (r *redisBackend) get(ctx context.Context, k entryKey, now time.Time) (orderdetail.CacheEntry, bool, error) {
	vals, err := r.client.HMGet(ctx, k.redisKey(r.prefix), hashFields...).Result()
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		return orderdetail.CacheEntry{}, true, errCorrupt
	} else if err != nil {
		return orderdetail.CacheEntry{}, false, err
	}
	return decode(vals, now.Add(maxFutureSkew))
}

// write sends the batch as one pipeline of putScript calls or, on Redis
// Cluster, one pipeline per master side by side: go-redis fails a whole
// cluster pipeline with the error of its slowest node, which would count
// writes that other masters stored as lost.
func (r *redisBackend) write(ctx context.Context, batch []writeReq, now time.Time, settle func(writeReq, bool, error)) {
	limit := now.Add(maxFutureSkew).UnixMicro()
	if cc, ok := r.client.(*redis.ClusterClient); ok && len(batch) > 1 {
		groups := map[*redis.Client][]writeReq{}
		for _, req := range batch {
			m, _ := cc.MasterForKey(ctx, req.k.redisKey(r.prefix)) // nil on error: a group of its own
			groups[m] = append(groups[m], req)
		}
		var wg sync.WaitGroup
		for _, g := range groups {
			wg.Go(func() { r.pipeline(ctx, g, limit, settle) })
		}
		wg.Wait()
		return
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
	_, perr := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, req := range batch {
			keys[i] = req.k.redisKey(r.prefix)
			cmds[i] = putScript.EvalSha(ctx, p, keys[i:i+1], args(req)...)
		}
		return nil
	})
	for i, req := range batch {
		n, err := cmds[i].Int()
		if cmds[i].Err() == nil && cmds[i].Val() == nil {
			// The pipeline failed before its commands were answered (a
			// refused AUTH, a dial error): they failed with its error.
			n, err = 0, cmp.Or(perr, errNoReply)
		}
		if redis.HasErrorPrefix(err, "NOSCRIPT") { // a restarted node forgot the script: send it whole
			n, err = putScript.Run(ctx, r.client, keys[i:i+1], args(req)...).Int()
		}
		settle(req, err == nil && n == 1, err)
	}
}

var errNoReply = errors.New("cache: no reply from Redis")

func (r *redisBackend) close() error { return r.client.Close() }

// urlDefaults are the go-redis options a --redis-url query may set, at the
// values used when it does not: a read on the request path is bounded by its
// ctx, so these are backstops, and a down Redis must fail at once rather
// than spend the page's budget on retries.
var urlDefaults = [][2]string{
	{"pool_size", "64"}, {"dial_timeout", "200ms"}, {"read_timeout", "100ms"}, {"write_timeout", "100ms"}, {"max_retries", "-1"},
}

// newClient builds the client of a --redis-url (one node or a Cluster, as
// the package documentation says); go-redis connects lazily. Errors name the
// flag and never hold a password.
func newClient(rawURL string) (redis.UniversalClient, error) {
	c, err := parseClient(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, fmt.Errorf("cache: invalid --redis-url %s: %w", redactURL(rawURL), err)
	}
	return c, nil
}

func parseClient(rawURL string) (redis.UniversalClient, error) {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return nil, err
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return nil, fmt.Errorf("scheme must be redis:// or rediss://, not %q", u.Scheme)
	case u.Host == "":
		return nil, errors.New("no host")
	}
	q := u.Query()
	for _, d := range urlDefaults {
		if !q.Has(d[0]) {
			q.Set(d[0], d[1])
		}
	}
	cluster, err := strconv.ParseBool(cmp.Or(q.Get("cluster"), "false")) // ours, not go-redis's
	if err != nil {
		return nil, fmt.Errorf("cluster=%q is not a boolean", q.Get("cluster"))
	}
	q.Del("cluster")
	if !cluster && !q.Has("addr") {
		u.RawQuery = q.Encode()
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, err
		}
		o.DialerRetries, o.ContextTimeoutEnabled = 1, true
		return redis.NewClient(o), nil
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return nil, fmt.Errorf("a cluster has no database %q", p)
	}
	if !q.Has("dialer_retries") {
		q.Set("dialer_retries", "1")
	}
	u.Path, u.RawQuery = "", q.Encode()
	o, err := redis.ParseClusterURL(u.String())
	if err != nil {
		return nil, err
	}
	if o.TLSConfig != nil {
		o.TLSConfig.MinVersion = max(o.TLSConfig.MinVersion, tls.VersionTLS12)
	}
	o.ContextTimeoutEnabled = true
	return redis.NewClusterClient(o), nil
}

// redactURL returns rawURL fit for a log line: its password becomes
// "xxxxx"; a string that does not parse is not echoed at all.
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL, redacted)"
	}
	return u.Redacted()
}

// clientLog carries go-redis's own lines (a failed dial, one per command
// during an outage) to the debug level: the Store's rate-limited warnings
// already tell the operator.
type clientLog struct{ log *slog.Logger }

func (c clientLog) Printf(ctx context.Context, format string, v ...any) {
	c.log.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}
