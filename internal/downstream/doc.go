// Package downstream holds orderagg's downstream services: the registry of
// the page's downstreams (registry.go, the one place a downstream is
// registered) and their HTTP client. A service is an API value — its name,
// the path of an order's answer and strict decoders — and Client[T] calls
// it; OrderAPI, InventoryAPI, CouponAPI and LogisticsAPI are the page's
// four, and an Entry of the registry turns each into the
// orderdetail.Downstream the page calls. The wire API they speak is
// documented in internal/sim, whose simulator they are tested against.
//
// # Isolation
//
// Each client owns its own tuned *http.Transport and so its own connection
// pool: one sick dependency holding all its connections cannot starve the
// others. The pool (Config.MaxConns) should be at least the dependency's
// bulkhead size, so that the bulkhead, not the pool, is what limits
// concurrency.
//
// # Errors
//
// Every error is wrapped with %w and says which call failed. The classes,
// as resilience.KindOf reads them:
//
//   - 404: wraps orderdetail.ErrNotFound and is marked resilience.BadRequest
//     (not the dependency's fault, never retried);
//   - any other 4xx but 408 and 429: resilience.BadRequest;
//   - 408, 429, 5xx, any other unexpected status (a *StatusError), a
//     transport error (ErrTransport), a body that is not the expected JSON
//     (ErrMalformed) or too large (ErrBodyTooLarge): a plain failure;
//   - the caller's context ending: wraps ctx.Err() (a deadline).
//
// The client's own timeouts (the dial timeout, Config.Timeout for a caller
// whose deadline is further away or absent) are failures of the dependency,
// not deadlines of the caller, even though the net package makes them match
// context.DeadlineExceeded; so they are reported as ErrTransport with the
// cause as text only.
//
// # Decoding
//
// Decoding tolerates unknown fields (APIs evolve) but nothing else: the
// mandatory fields must be present, non-null and well typed, the ids must be
// the requested ones, trailing data is rejected and a body is read up to
// Config.MaxBodyBytes+1 bytes and rejected beyond. A malformed answer is an
// error, never a zero value.
//
// # Headers
//
// Every request carries Accept: application/json, X-Budget-Ms with the
// whole milliseconds left before ctx's deadline (rounded down, omitted
// without a deadline) and X-Request-Id when ctx carries one (see
// WithRequestID). A 504 whose error code is BUDGET_EXHAUSTED means the
// server gave up because that budget ran out; it is reported as
// context.DeadlineExceeded, as if the caller's own deadline had fired.
package downstream
