// Package cache is orderagg's last-good store: for each dependency and order,
// the most recent live answer, served only when that dependency fails. It
// lives in Redis (--redis-url) or, with no URL, in process memory (bounded,
// not durable, not shared; Open logs a WARN).
//
// Writes are behind the request and newest wins: an entry replaces the
// stored one only if its as_of is newer, decided atomically where it is
// stored, so writers and instances cannot interleave.
//
// Redis schema: the key {prefix}:{dep}:{orderID}, by default
// "orderagg:v1:lastgood:logistics:o-1001", holds a hash of v (schema version
// "1"), as_of (Unix microseconds, decimal) and val (the section's JSON) with
// the entry's ttl. Any other value, or an as_of beyond now+5s, or a val that
// is not JSON, is ErrCacheCorrupt until the next write replaces it. A
// compatible schema change bumps v (readers first), an incompatible one the
// prefix.
//
// URLs: redis://[user:password@]host:6379[/db], rediss:// for TLS; a Redis
// Cluster as redis://n1:7000?addr=n2:7000 (seed nodes) or
// redis://n1:7000?cluster=true. The query takes go-redis's options
// (pool_size, read_timeout, max_retries, ...); an unknown one is an error.
package cache
