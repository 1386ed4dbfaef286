// Package cache is orderagg's last-good store: for each dependency and order,
// the most recent live answer, kept in Redis and served only when that
// dependency fails. *Store implements orderdetail.LastGood.
//
// # Why write-behind
//
// The cache exists for the bad moments, so it must never make a good moment
// worse. Put only hands the entry to a bounded queue and returns; a few
// writer goroutines owned by the Store write it afterwards. A slow or
// frozen Redis therefore costs requests nothing: the writers stall for at
// most WriteTimeout per entry, the queue fills, and Put drops (and counts)
// what does not fit. Losing a write is cheap: the next live answer brings a
// new one. Write failures never reach requests; they are counted and logged
// at most once per ErrorLogInterval.
//
// Reads are on the request path and take one round trip (HMGET), bounded by
// the caller's context deadline: the client is built with
// ContextTimeoutEnabled, so the deadline becomes the socket deadline. A
// cancellation without a deadline is noticed when the reply arrives or the
// socket read timeout (Config.Pool.ReadTimeout) ends. On one node (or
// Sentinel) go-redis retries nothing by default here and dials once per
// command, so a down Redis fails at once and the caller falls back instead of
// spending its budget on backoffs. A Redis Cluster client is different: it
// follows slot redirects and retries a dead node or a "CLUSTERDOWN" reply up
// to max_redirects (3) times within the deadline, so while a cluster is
// failing a read uses its whole sub-budget (counted as a cache timeout) until
// the cache's breaker opens — still inside the page's deadline
// (integration/cluster_test.go measures it). Writes to a cluster go in one
// pipeline per master, so one dead node does not fail the writes bound for
// the others.
//
// # Why newest-wins in Lua
//
// Several writers, and several instances, may write the same key at once,
// and a late write of an old answer must not replace a newer one. The
// comparison of the stored as_of with the new one, the write and the TTL are
// therefore one Lua script, atomic in Redis; a read-compare-write from Go
// would let two writers interleave. An equal as_of is a no-op, so replays are
// harmless. The script replaces what it cannot compare with (another Redis
// type, an unreadable as_of, an as_of beyond the writer's clock plus
// MaxFutureSkew), so a corrupt key heals on the next write instead of
// blocking writes until it expires. The script touches one key, so it runs
// unchanged on Redis Cluster.
//
// # Key and value schema
//
// Key: {prefix}:{dep}:{orderID}, with the default prefix
// "orderagg:v1:lastgood", e.g. "orderagg:v1:lastgood:logistics:o-1001".
// Order ids are validated at the edge (^[A-Za-z0-9_-]{1,64}$) and dependency
// names are fixed, so neither holds the ':' separator.
//
// Value: a hash with three fields, and the TTL given to Put (PEXPIRE):
//
//	v      schema version of the value, "1"
//	as_of  when the answer was live, Unix microseconds in decimal
//	       (exact in Lua's doubles until the year 2255; nanoseconds would not be)
//	val    the section's JSON, exactly as handed to Put
//
// A hash keeps as_of readable by the script without decoding the payload, and
// the payload stored as raw bytes (no base64, no escaping). Get treats as a
// miss, counted as Corrupt, a value that is not such a hash, lacks a field,
// has an unknown v, an unparsable as_of, an as_of more than MaxFutureSkew in
// the future, or a val that is not valid JSON.
//
// # Evolving the schema
//
// A compatible change (a new field, a new encoding of val) bumps v. The
// decoder keeps accepting every older v and so must be deployed first: ship a
// release that reads v1 and v2 while writing v1, then one that writes v2.
// Until then an instance meets v2 values as misses, never as garbage. The
// as_of field keeps its name and meaning in every version, because it is what
// orders writes across versions: an old instance does not replace a newer v2
// entry with an older v1 one. An incompatible change gets a new key prefix
// ("orderagg:v2:lastgood"); the old keys die with their TTLs.
//
// # URL forms (--redis-url)
//
// Only redis:// and rediss:// (TLS, at least 1.2) are accepted; any other
// scheme is an error naming --redis-url. The query takes go-redis's options
// (pool_size, dial_timeout, read_timeout, write_timeout, max_retries,
// client_name, skip_verify, …), which win over Config.Pool; an unknown one
// is an error. The topology follows from the query:
//
//	redis://[user:password@]host:6379[/db]              one node (or a proxy)
//	rediss://[user:password@]host:6380[/db]             the same over TLS
//	redis://[user:password@]n1:7000?addr=n2:7000&addr=n3:7000
//	                                                    Redis Cluster, seed nodes
//	redis://[user:password@]endpoint:6379?cluster=true  Redis Cluster behind one
//	                                                    configuration endpoint
//	redis://[suser:spassword@]s1:26379/db?master_name=mymaster&addr=s2:26379&password=pw
//	                                                    Sentinel: the userinfo
//	                                                    authenticates to the
//	                                                    sentinels, username= and
//	                                                    password= to the master
//
// A cluster has no databases, so a path other than /0 is refused there.
// Empty: an embedded in-process Redis-protocol server (miniredis) on a
// loopback port, through the same client code. It is for demos and tests:
// it is not durable, not shared between instances, and Open says so with a
// WARN. Its clock is moved forward once a second, so its TTLs expire up to a
// second late. It answers the newest-wins script in Go rather than in
// miniredis's Lua interpreter, with the script's exact outcome (see
// nativePut in embedded.go); the rest is miniredis.
//
// Open never fails because Redis is unreachable: it logs a warning and the
// client connects when next needed. RedactURL hides the passwords (user
// information, password=, sentinel_password=) of a URL for logs; errors never
// hold them.
//
// # Observability
//
// Stats is a snapshot of atomic counters (hits, misses, corrupt values, read
// errors, writes stored, skipped as stale, dropped, failed). WithListener
// hands every such event and its dependency to telemetry, and WithHook (or
// Client().AddHook) instruments the go-redis client, so this package needs
// no OpenTelemetry import. go-redis's own log lines are routed to the
// Store's logger at the same bounded rate as write errors.
package cache
