// Package cache is orderagg's last-good store: for each dependency and order,
// the most recent live answer, served only when that dependency fails.
// *Store implements orderdetail.LastGood on Redis (--redis-url) or, with no
// URL, in process memory (bounded, not durable, not shared; Open logs a WARN).
//
// Writes are behind the request: PutContext hands the entry to a bounded
// queue and returns; writer goroutines owned by the Store write what is
// queued in batches, one pipelined round trip each. A full queue drops the
// entry (counted): a request never waits for the cache. Close drains it.
//
// Newest wins: an entry replaces the stored one only if its as_of is newer,
// decided atomically where it is stored (a Lua script in Redis), so writers
// and instances cannot interleave. A rewrite identical to the copy this Store
// last saw confirmed is skipped while that copy is younger than a quarter of
// its ttl. An entry counts as stored only once the store confirms it; a
// dropped, failed or refused write leaves nothing marked, so the next live
// answer writes it.
//
// Redis schema. Key: {prefix}:{dep}:{orderID}, by default
// "orderagg:v1:lastgood:logistics:o-1001". Value: a hash of v (schema
// version, "1"), as_of (Unix microseconds, decimal) and val (the section's
// JSON), with the ttl given to PutContext. A value that is not such a hash,
// has an unknown v, an unreadable as_of or one beyond now+MaxFutureSkew, or a
// val that is not JSON is served as ErrCacheCorrupt, and the next write
// replaces it. A compatible schema change bumps v (readers first); an
// incompatible one takes a new prefix.
//
// URLs: redis://[user:password@]host:6379[/db], rediss:// for TLS 1.2+;
// Redis Cluster as redis://n1:7000?addr=n2:7000 (seed nodes) or
// redis://endpoint:6379?cluster=true. The query takes go-redis's options
// (pool_size, dial_timeout, read_timeout, write_timeout, max_retries, ...),
// which win over this package's defaults (64 connections, 200ms dial, 100ms
// socket reads and writes, no retries); an unknown option is an error.
package cache
