// Package resilience guards the calls to one dependency. DoUntil (or Do)
// runs a call through these layers, outer to inner:
//
//	budget    min(timeout, the caller's deadline and bound); none left → KindDeadline
//	breaker   open → KindShortCircuited, nothing called
//	bulkhead  full → KindRejected, nothing called
//	context   the sub-budget's deadline, which cancels the work
//	attempts  fn, retried on KindFailure while the breaker is closed and
//	          the time left holds a backoff and a typical attempt
//
// So nothing outlives the caller's budget, a sick dependency costs no slot,
// and retries stay inside the slot and the sub-budget. Fallback runs after
// DoUntil gave up. Every call ends in one Kind, and errors are *Error
// values that match the kinds' sentinels. A Guard is built once per
// dependency and is safe for concurrent use.
package resilience
