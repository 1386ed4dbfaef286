package cache

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// entryKey names one entry: a dependency and an order.
type entryKey struct{ dep, orderID string }

// redisKey is {prefix}:{dep}:{orderID}: one key per entry, so every command
// is single-key and valid on Redis Cluster.
func (k entryKey) redisKey(prefix string) string { return prefix + ":" + k.dep + ":" + k.orderID }

// putScript stores an entry only if it is newer than the stored one, with its
// TTL, in one atomic step. It replaces what it cannot compare with (another
// type, an unreadable as_of, one beyond ARGV[5]), so a corrupt key heals on
// the next write; DEL drops the fields a newer schema may have added.
// KEYS[1] key; ARGV: version, as_of µs, payload, TTL ms, latest believable
// as_of µs. Returns 1 when stored, 0 when the stored entry was as new or newer.
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

// valueVersion is the schema version written and read.
const valueVersion = "1"

// hashFields are the fields Get reads, in decode's order.
var hashFields = []string{"v", "as_of", "val"}

// errCorrupt is a stored value that cannot be served.
var errCorrupt = errors.New("corrupt value")

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
