package cache

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/redis/go-redis/v9"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// redisBackend keeps the entries in Redis, in the schema of the package
// documentation: every command is single-key, valid on Redis Cluster.
//
// A servable entry read from Redis answers again, without a round trip, for
// readReuse at most (and never past its TTL): while a dependency fails,
// every page of an order reads the same entry. So a read may answer what
// Redis held up to readReuse before; a write this process stores drops the
// key's reused copy at once.
type redisBackend struct {
	client redis.UniversalClient
	prefix string
	reads  *memory // the reused copies
}

const readReuse, readReuseEntries = time.Second, 10_000

func (r *redisBackend) key(k entryKey) string { return r.prefix + ":" + k.dep + ":" + k.orderID }

func (r *redisBackend) get(ctx context.Context, k entryKey, now time.Time) (orderdetail.CacheEntry, bool, error) {
	if e, ok, _ := r.reads.get(ctx, k, now); ok {
		return e, true, nil
	}
	var hmget *redis.SliceCmd
	var pttl *redis.DurationCmd
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error { // one round trip
		hmget, pttl = p.HMGet(ctx, r.key(k), "v", "as_of", "val"), p.PTTL(ctx, r.key(k))
		return nil
	})
	if redis.HasErrorPrefix(hmget.Err(), "WRONGTYPE") {
		return orderdetail.CacheEntry{}, true, errCorrupt
	} else if err != nil {
		return orderdetail.CacheEntry{}, false, err
	}
	e, found, err := decode(hmget.Val(), now.Add(maxFutureSkew))
	if found && err == nil && pttl.Val() > 0 {
		_, _ = r.reads.put(ctx, writeReq{k: k, e: e, ttl: min(pttl.Val(), readReuse)}, now)
	}
	return e, found, err
}

// put runs putScript: EVALSHA, then EVAL if Redis answers NOSCRIPT.
func (r *redisBackend) put(ctx context.Context, req writeReq, now time.Time) (bool, error) {
	ttlMillis := int64((req.ttl + time.Millisecond - 1) / time.Millisecond) // rounded up
	n, err := putScript.Run(ctx, r.client, []string{r.key(req.k)},
		valueVersion, req.e.AsOf.UnixMicro(), req.e.Payload, ttlMillis, now.Add(maxFutureSkew).UnixMicro()).Int()
	if n == 1 && err == nil {
		r.reads.forget(req.k)
	}
	return n == 1, err
}

// putScript stores an entry, with its TTL, only if it is newer than the
// stored one, atomically. It replaces what it cannot compare with, so a
// corrupt key heals on the next write. KEYS[1] key; ARGV: version, as_of µs,
// payload, TTL ms, latest believable as_of µs. Returns 1 when stored.
var putScript = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1])
if type(t) == 'table' then t = t['ok'] end
if t == 'hash' then
  local cur = tonumber(redis.call('HGET', KEYS[1], 'as_of'))
  if cur ~= nil and cur >= tonumber(ARGV[2]) and cur <= tonumber(ARGV[5]) then
    return 0
  end
end
if t ~= 'none' then
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'as_of', ARGV[2], 'val', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

const valueVersion = "1" // the schema version written and read

var errCorrupt = errors.New("corrupt value") // a stored value that cannot be served

// decode reads the reply of HMGET key v as_of val: found is false for an
// absent key; an as_of after latest is corrupt.
func decode(vals []any, latest time.Time) (e orderdetail.CacheEntry, found bool, err error) {
	if len(vals) != 3 {
		return e, true, errCorrupt
	} else if vals[0] == nil && vals[1] == nil && vals[2] == nil {
		return e, false, nil
	}
	version, _ := vals[0].(string)
	asOfText, _ := vals[1].(string)
	payload, ok := vals[2].(string)
	asOfUS, err := strconv.ParseInt(asOfText, 10, 64)
	if !ok || version != valueVersion || err != nil || time.UnixMicro(asOfUS).After(latest) || !json.Valid([]byte(payload)) {
		return e, true, errCorrupt
	}
	return orderdetail.CacheEntry{AsOf: time.UnixMicro(asOfUS).UTC(), Payload: []byte(payload)}, true, nil
}

// memory is the in-process store: at most Config.MemoryEntries entries, the
// least recently used going first; an entry past its ttl is a miss.
type memory struct {
	mu      sync.Mutex
	entries *simplelru.LRU[entryKey, memEntry]
}

type memEntry struct {
	e       orderdetail.CacheEntry
	expires time.Time
}

func newMemory(maxEntries int) *memory {
	entries, _ := simplelru.NewLRU[entryKey, memEntry](maxEntries, nil) // fails only for a size <= 0
	return &memory{entries: entries}
}

func (m *memory) get(_ context.Context, k entryKey, now time.Time) (orderdetail.CacheEntry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.entries.Get(k)
	return cur.e, ok && now.Before(cur.expires), nil
}

func (m *memory) put(_ context.Context, req writeReq, now time.Time) (bool, error) {
	e := orderdetail.CacheEntry{AsOf: req.e.AsOf.Truncate(time.Microsecond).UTC(), Payload: req.e.Payload} // as in Redis
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.entries.Peek(req.k); ok && now.Before(cur.expires) && !e.AsOf.After(cur.e.AsOf) {
		return false, nil
	}
	m.entries.Add(req.k, memEntry{e: e, expires: now.Add(req.ttl)})
	return true, nil
}

func (m *memory) forget(k entryKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries.Remove(k)
}

// urlDefaults are go-redis options a --redis-url query may override: reads
// are bounded by their ctx, and a down Redis must fail at once.
var urlDefaults = [][2]string{
	{"pool_size", "64"}, {"dial_timeout", "200ms"}, {"read_timeout", "100ms"}, {"write_timeout", "100ms"}, {"max_retries", "-1"},
}

// newClient builds the (lazily connecting) client of a --redis-url. Errors
// name the flag and never hold a password.
func newClient(rawURL string) (redis.UniversalClient, error) {
	c, err := parseClient(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, fmt.Errorf("cache: invalid --redis-url: %w", err)
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
	q.Set("dialer_retries", cmp.Or(q.Get("dialer_retries"), "1"))
	u.RawQuery = q.Encode()
	o, err := redis.ParseClusterURL(u.String())
	if err != nil {
		return nil, err
	}
	o.ContextTimeoutEnabled = true // and TLS 1.2 at least, Go's default for clients
	return redis.NewClusterClient(o), nil
}
