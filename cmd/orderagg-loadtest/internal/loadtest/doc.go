// Package loadtest is `orderagg-loadtest`: a load tool that users point at
// their own orderagg, and the in-process experiments of docs/experiments.md.
//
// # What a run measures
//
// Requests go to GET {url}/v1/orders/o-N, cycling N through 1…--ids. A run
// sends load for --warmup, which is left out of every figure (connection
// pools, caches and rolling windows are still filling), then measures for
// --duration. The summary counts the requests sent in the measured window:
// the achieved rate, latency percentiles (all requests, and the 200 answers
// split into full and degraded pages — a fast page made of fallbacks is not
// a fast page), HTTP statuses, requests with no answer by cause, the share
// of degraded pages, and for each section (order, inventory, coupons,
// logistics) how many 200 answers had it live, from the last-good cache or
// as a fallback, and why not live. A 200 answer that is not the contract's
// JSON is counted as a bad body, so the tool doubles as a contract check
// under load.
//
// With --json the summary is one object that starts with the run's
// "settings" (target, closed or open loop and its size, durations as given,
// ids, limits). A figure that had no data is null, never 0: the rate
// without a measured window, the latency of a kind of answer that never
// came (full or degraded pages), the degraded ratio without a 200 answer,
// the percentiles of a second in which nothing finished. Counts stay
// numbers.
//
// # Closed and open loop
//
// With --rate 0 (the default) --concurrency workers each send a request and
// wait for its answer: the closed loop shows what the service can sustain,
// but a slow service slows the load down with it, hiding how long users
// would wait. With --rate R the requests leave on a fixed schedule (request
// i is due at i/R seconds) whatever the answers, each on its own goroutine,
// and latency counts from when a request was due, not when it left, so a
// stalled pacer cannot flatter the service ("coordinated omission").
//
// # Bounds
//
// Every run is bounded in time (warm-up + duration, plus at most --timeout
// for the requests still in flight) and in requests (--max-requests measured
// requests; the warm-up is bounded by its duration). In an open loop the
// requests in flight are at most rate × timeout. Latencies go into a
// fixed-size log-linear histogram (HdrHistogram's layout, 0.8 % precision,
// exact min and max), so memory does not grow with the length of the run.
// Per-second figures are kept only by the experiments that plot them.
//
// # Loopback only, unless asked
//
// A load test is indistinguishable from an attack on somebody else's
// service, so without --allow-remote the target must be loopback: the URL's
// host is checked up front (a name must resolve only to loopback addresses)
// and the dialer checks every address it connects to, which also defeats a
// name that resolves differently later. Proxies from the environment are
// ignored for the same reason.
//
// # Why not vegeta
//
// github.com/tsenart/vegeta/v12 would do the pacing, but as a library it
// requires prometheus/prometheus, miekg/dns, influxdata/tdigest, easyjson,
// rs/dnscache and more, all of which would land in the service's go.mod for
// a feature that needs a ticker, a worker pool and a histogram. The engine
// here is one file (engine.go) and measures what orderagg needs
// (section sources) that vegeta does not.
//
// # Experiments
//
// --scenario NAME starts, in-process and on loopback ports, an `orderagg
// sim` shaped like the background study's dependencies, orderagg itself
// (internal/app, with its per-dependency settings edited per step) and,
// where the comparison needs it, the bare floor aggregator of
// internal/loadtest/floor; drives load; and prints a table with the
// machine's description, the headline ratios measured in the same run and,
// with --plot DIR, SVG charts drawn by svg.go. The floor is bench equipment,
// reachable only through --scenario and the bench module.
package loadtest
