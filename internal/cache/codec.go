package cache

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// The stored value is a Redis hash; see the package documentation for why.
const (
	fieldVersion = "v"     // schema version of the value, decimal
	fieldAsOf    = "as_of" // when the answer was live: Unix microseconds, decimal
	fieldPayload = "val"   // the section's JSON, as handed to Put

	// valueVersion is the version this code writes. decode accepts it and
	// every older version it still knows.
	valueVersion = 1
)

// valueVersionArg is valueVersion as the script's argument.
var valueVersionArg = strconv.Itoa(valueVersion)

// key is the Redis key of one entry: {prefix}:{dep}:{orderID}. Order ids are
// validated at the edge (^[A-Za-z0-9_-]{1,64}$) and dependency names are
// fixed, so neither can contain the separator. One key per entry keeps
// every command single-key, hence valid on Redis Cluster.
func key(prefix, dep, orderID string) string {
	var b strings.Builder
	b.Grow(len(prefix) + len(dep) + len(orderID) + 2)
	b.WriteString(prefix)
	b.WriteByte(':')
	b.WriteString(dep)
	b.WriteByte(':')
	b.WriteString(orderID)
	return b.String()
}

// putScript stores an entry only if it is newer than the stored one, and sets
// its TTL, in one atomic step. Comparing in Redis rather than in the writer is
// what makes newest-wins hold across writers and instances: a
// read-compare-write from Go would let two writers interleave.
//
// as_of is compared as a number of microseconds: that is exact in Lua's
// doubles (2^53 µs is the year 2255), where nanoseconds would not be.
// A value that is not one of our hashes (wrong type, unreadable as_of) is
// replaced, and so is one whose as_of is beyond the writer's clock plus
// MaxFutureSkew (which Get refuses to serve): a corrupt key heals on the
// next write instead of blocking writes until it expires. DEL before HSET drops fields a newer schema may
// have added, so the hash holds exactly what this version wrote.
//
// KEYS[1] key; ARGV[1] version, ARGV[2] as_of µs, ARGV[3] payload, ARGV[4]
// TTL ms, ARGV[5] the latest believable as_of µs.
// Returns 1 when stored, 0 when the stored entry was as new or newer.
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

// errCorrupt marks a stored value that cannot be served. It never leaves the
// package: Get turns it into orderdetail.ErrCacheCorrupt.
var errCorrupt = errors.New("corrupt value")

// decode reads the reply of HMGET key v as_of val. ok is false when the key
// does not exist. now and skew bound how far in the future as_of may be.
func decode(vals []any, now time.Time, skew time.Duration) (e orderdetail.CacheEntry, ok bool, err error) {
	if len(vals) != 3 {
		return e, false, errCorrupt
	}
	if vals[0] == nil && vals[1] == nil && vals[2] == nil {
		return e, false, nil
	}
	version, okV := vals[0].(string)
	asOfText, okA := vals[1].(string)
	payload, okP := vals[2].(string)
	if !okV || !okA || !okP {
		return e, true, errCorrupt
	}
	// Versions this code can read. A newer one (written by a newer
	// deployment) is not guessed at: it is a miss until this instance is
	// upgraded too.
	switch version {
	case "1":
	default:
		return e, true, errCorrupt
	}
	asOfUS, err := strconv.ParseInt(asOfText, 10, 64)
	if err != nil {
		return e, true, errCorrupt
	}
	asOf := time.UnixMicro(asOfUS)
	if asOf.After(now.Add(skew)) {
		return e, true, errCorrupt
	}
	body := []byte(payload)
	if !json.Valid(body) {
		return e, true, errCorrupt
	}
	return orderdetail.CacheEntry{AsOf: asOf.UTC(), Payload: body}, true, nil
}
