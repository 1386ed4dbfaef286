// Package resilience guards the calls to one dependency. Do (or DoUntil)
// runs a call through these layers, outer to inner:
//
//	budget    min(sub-budget, the caller's deadline and bound); none left → KindDeadline
//	breaker   open → KindShortCircuited, at once, nothing called
//	bulkhead  full (and its queue full, or the wait over) → KindRejected
//	context   the sub-budget's deadline, which cancels the work
//	attempts  fn(ctx), retried on KindFailure while the breaker is closed, the
//	          retry budget has room and the time left holds a backoff and a
//	          typical attempt; or hedged: a second attempt after the observed
//	          high-percentile latency, the first good answer winning
//
// Nothing may outlive the caller's budget, so it is outermost; a sick
// dependency costs no slot, so the breaker comes before the bulkhead; and
// retries and hedges run inside the slot and the sub-budget, so they never
// stretch a call past its budget nor multiply its concurrency unseen.
// Fallback runs a fallback after Do gave up, under its own bound.
//
// Every call ends in one Kind, and errors are *Error values matching the
// kinds' sentinels with errors.Is. The breaker opens on ConsecutiveFailures
// failures or timeouts in a row, or when the rolling window holds
// MinRequests calls whose error or slow-call rate reaches its threshold;
// open, it sleeps SleepWindow (doubling per failed probe up to
// MaxSleepWindow, and while the dependency flaps), then admits
// HalfOpenProbes probes. Snapshot recommends max(3×P99, 2×P99.9) + margin
// over successful calls; with AutoTimeout the sub-budget follows that rule.
// A Listener hears every event; WithTracerProvider adds a span per call.
//
// A Guard is built once per dependency, shared, and safe for concurrent
// use; Reconfigure swaps its settings while calls are in flight.
package resilience
