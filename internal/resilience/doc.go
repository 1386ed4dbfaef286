// Package resilience guards calls to one dependency: a bulkhead, a circuit
// breaker, a sub-budget, bounded retries and optional hedging, with typed
// outcomes and rolling latency statistics. It knows nothing of HTTP, Redis or
// OpenTelemetry; telemetry plugs in through a Listener.
//
// # Layers, outer to inner
//
//	Do(ctx) ─ budget: min(Timeout, ctx's remaining deadline); none left → KindDeadline
//	        ─ breaker: open → KindShortCircuited, at once, nothing called
//	        ─ bulkhead: full (and queue full or wait over) → KindRejected
//	        ─ sub-budget context (the deadline that cancels the work)
//	        ─ attempts: fn(ctx) … retried on KindFailure while the breaker is
//	          closed, the retry budget has room and the budget left can hold a
//	          backoff plus a typical attempt; or hedged: a backup attempt after
//	          the observed high-percentile latency, first good answer wins
//
// The deadline is outermost because nothing may outlive the caller's budget.
// The breaker comes before the bulkhead so that a sick dependency costs no
// slot; the bulkhead comes before the work so that admission is decided
// before anything is spent; retries and hedges sit inside the sub-budget and
// inside the bulkhead slot, so they can never stretch a call past its budget
// or multiply its concurrency unseen (a hedge takes a slot of its own).
// Fallbacks (see Fallback) run after Do gives up, under their own small bound.
//
// # Outcomes
//
// Every call ends in one Kind: success, failure, timeout, short_circuited,
// rejected, bad_request (the caller's fault, e.g. a 404: never counted against
// the dependency, never retried) or deadline (the caller's own deadline or
// cancellation: not the dependency's fault). Errors are *Error values that
// match the sentinels with errors.Is (errors.Is(err, resilience.ErrTimeout))
// and unwrap to the dependency's own error.
//
// # Breaker
//
// Two rules open it. ConsecutiveFailures (default 10) failures or timeouts in
// a row, with no answer in between, open it at once: that sees a hang or a
// hard failure within a second at 20 calls/s and above, where a rolling
// window full of healthy history would take seconds, while noise almost
// never strings ten together (5 % stalls: 0.05^10 ≈ 1e-13 per run). Beside
// it a rolling window (default 10 s in 10 buckets) opens it when it holds at
// least MinRequests calls and either failures plus timeouts, or slow calls,
// reach their percentage.
//
// Open, it sleeps SleepWindow (default 500ms), then admits HalfOpenProbes
// probes: all must succeed to close it, one failure re-opens it for twice
// the sleep, up to MaxSleepWindow (default 5s): 0.5, 1, 2, 4, 5, 5 s… A
// re-open within a window of the last close keeps growing the sleep (a
// flapping dependency); a recovery that lasted a window starts over.
// Operators can force it open or closed. State is per process: each
// instance judges its dependencies by what it has seen.
//
// # Retries
//
// The backoff before retry k is drawn from (0, min(Backoff×2^(k-1),
// MaxBackoff)] (full jitter), and a retry is made only if the sub-budget
// left holds that wait plus a typical attempt.
//
// # Timeout advice
//
// Snapshot recommends max(3×P99, 2×P99.9) + TimeoutMargin over the window's
// successful calls only (a timed-out call's latency is the budget, not the
// dependency's), and nothing below AdvisorMinSuccesses of them. With
// AutoTimeout the sub-budget follows that rule, within TimeoutMin and
// TimeoutMax, smoothly, and never upwards on the strength of a hang.
//
// # Cost
//
// A call on the common path is two atomic loads for the breaker (its state
// and its run of failures, written only when a failure starts or ends one),
// one atomic add for the bulkhead, one context.WithDeadline, two clock reads
// and a few striped atomic adds for the statistics (an adaptive sub-budget
// adds two loads): no goroutine, no lock, and no
// allocation beyond the deadline context's (none at all when the caller's
// deadline is the tighter one). See docs/benchmarks.md.
//
// Guards are built once, shared, and safe for concurrent use; Reconfigure
// swaps settings atomically while calls are in flight.
package resilience
