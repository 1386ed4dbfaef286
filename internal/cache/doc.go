// Package cache is orderagg's last-good store: for each dependency and order,
// the most recent live answer, served only when that dependency fails.
// *Store implements orderdetail.LastGood, on Redis (--redis-url) or, when no
// URL is given, in process memory (a demo store: bounded, not durable, not
// shared between instances; Open logs a WARN saying so).
//
// Writes are behind the request: PutContext hands the entry to a bounded
// queue and returns, and writer goroutines owned by the Store write batches
// of entries in one pipelined round trip. A full queue drops the entry (and
// counts it): a request never waits for the cache. Close drains the queue.
//
// Newest wins: an entry replaces the stored one only if its as_of is newer,
// decided atomically where it is stored (a Lua script in Redis), so writers
// and instances cannot interleave. A rewrite identical to the copy this Store
// last confirmed as stored is skipped while that copy is younger than a
// quarter of its ttl. An entry counts as stored only once Redis (or memory)
// confirms it; a dropped, failed or refused write leaves nothing marked, so
// the next live answer writes it. Hence, within one instance: after a live
// answer, the stored copy is that answer or a newer one, within the
// write-behind delay (or until the next live answer, for a dropped write).
//
// Redis schema. Key: {prefix}:{dep}:{orderID}, by default
// "orderagg:v1:lastgood:logistics:o-1001" (order ids are validated at the
// edge and hold no ':'). Value: a hash of v (schema version, "1"), as_of
// (Unix microseconds, decimal) and val (the section's JSON), with the ttl
// given to PutContext. Get serves as a miss, ErrCacheCorrupt, a value that
// is not such a hash, has an unknown v, an unreadable as_of or one beyond
// now+MaxFutureSkew, or a val that is not JSON; the next newer write replaces
// it. A compatible schema change bumps v (readers first); an incompatible one
// takes a new prefix.
//
// URLs: redis://[user:password@]host:6379[/db] (rediss:// for TLS 1.2+);
// Redis Cluster as redis://n1:7000?addr=n2:7000&addr=n3:7000 or
// redis://endpoint:6379?cluster=true; Sentinel as
// redis://[suser:spass@]s1:26379/db?master_name=m&addr=s2:26379&password=pw.
// The query takes go-redis's options (pool_size, dial_timeout, read_timeout,
// write_timeout, max_retries, ...), which win over this package's defaults
// (64 connections, 200ms dial, 100ms socket reads and writes, no retries);
// an unknown option is an error. Open never fails because Redis is down: it
// logs a warning and the client connects when next needed.
package cache
