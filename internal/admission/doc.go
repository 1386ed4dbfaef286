// Package admission decides whether one more order-detail request may start:
// the service's front door, before any work is spent. A refused request gets
// an immediate 503 OVERLOADED with Retry-After from the handler; this package
// only counts and decides.
//
// # API
//
// A Limiter hands out Tokens:
//
//	tok, ok := lim.Acquire()
//	if !ok {
//		return overloaded() // nothing to release
//	}
//	outcome := admission.Ignored
//	defer func() { tok.Release(outcome) }()
//	… serve; set outcome to Succeeded (a latency sample) or Dropped (missed
//	its deadline: overload) once the request has run its course …
//
// A Token is a small value: Acquire and Release allocate nothing. Release
// works once per Token (later calls are no-ops), the zero Token that a
// refusal returns holds nothing, and the zero Outcome, Ignored, teaches the
// limiter nothing, so a panic or an early return releases the slot without
// feeding it a misleading sample. Limit and Inflight are for metrics and
// status pages.
//
// # Fixed
//
// Fixed(n) is the fixed cap (--max-inflight): one atomic add to admit, one
// to refuse or release. Exactly the behaviour before this package existed.
//
// # Adaptive: a latency gradient, guarded
//
// Adaptive starts at Max (--max-inflight) and recomputes its limit once per
// Window (100ms, and at least MinSamples=10 samples) from the window's mean
// latency (Acquire to Release of Succeeded and Dropped requests):
//
//   - baseline: the lowest window mean seen — the latency without queueing.
//   - gradient = clamp(Tolerance × baseline / mean, 0.5, 1), Tolerance 2.
//   - when the limit was reached in the window (in-flight peak ≥ limit), or a
//     request missed its deadline (Dropped; the gradient is then 0.5):
//     limit = used × gradient + √used, used = min(limit, in-flight peak).
//     At gradient 1 that probes upwards by √limit; the floor of 0.5 halves
//     it at most per window (1024 → 16 in ~9 windows).
//   - otherwise (the limit refused no one, nothing was late): limit += √limit,
//     relaxing back to Max. A slower page with the limit not reached is not
//     the limit's business: a slow dependency raises the in-flight count at
//     the same throughput (Little's law), and cutting the limit then would
//     only refuse pages that would have been served, degraded or not.
//   - undo: Settle (2s, longer than the deadline) after the limit started
//     falling, if it has at least halved but the mean latency is still
//     within a quarter of its worst since the fall (and nothing is late),
//     cutting concurrency did not help — the latency is not this process's
//     queueing. The limit goes back to where the fall began and the current
//     latency becomes the baseline.
//   - the limit stays within [Min, Max]; Min defaults to 16.
//
// Why a gradient and not AIMD: AIMD needs an absolute latency threshold, and
// this service's legitimate page latency spans ~2ms (all live) to ~1.1s (a
// dependency at its sub-budget plus a cache read), so any one threshold
// either fires on a slow dependency or only near the 1.5s deadline, when the
// damage is done; AIMD on deadline misses alone reacts only after pages have
// started failing. A gradient compares against the measured unloaded
// latency, so it sees queueing at 10× a 5ms baseline. Its known weakness —
// it cannot tell its own queueing from a slow dependency — is why it only
// cuts when the limit is what holds requests back (or pages miss their
// deadline), and why it undoes a cut that did not bring latency down. It is
// Netflix concurrency-limits' Gradient2 in spirit (gradient with a 0.5
// floor, √limit queue allowance, windowed samples) with those two guards
// instead of Gradient2's long-term average baseline, whose drift under
// sustained overload lets latency creep back up.
//
// Cost: Acquire is an atomic add, an atomic load, a clock read (and a CAS
// only when the window's in-flight peak rises); Release an atomic add, a
// clock read and one packed atomic add for the sample (count and µs sum in
// one word, so a window is taken with one swap). Once per window one
// releaser recomputes the limit under a mutex it only ever tries
// (TryLock): no request waits for it. See BenchmarkAcquireRelease.
//
// # Measured
//
// experiment_test.go puts a real handlers.New router (loopback httptest
// server, deadline 1.5s) in front of a fake Pager and drives it with an
// open-loop Poisson load from the same process, on a shared 2-core VM:
//
//	ORDERAGG_ADMISSION_EXPERIMENT=1 ORDERAGG_ADMISSION_SERVICE=10ms \
//	  go test -run TestAdmissionExperiment -v -timeout 60m ./internal/admission/
//
// The CPU-bound Pager burns 10ms of CPU per page in 100µs slices with a
// yield between them (processor sharing on the 2 cores; capacity ≈ 185
// pages/s). Medians of 3 runs, 10 s phases, client-side latencies:
//
//	scenario                    limiter     goodput÷cap  P50 200  P99 200  rejected  late(503)
//	10× overload                Fixed(1024)    0.00      1531ms   1556ms    62%       38%
//	                            Fixed(16)      0.91       101ms    124ms    91%        0%
//	                            Adaptive       0.75        99ms    144ms    87%        5%
//	0.7× after the overload     Adaptive       0.68        17ms     59ms     0%        0%
//	0.7× healthy                all three      0.70     19±1ms    61–67ms    0%        0%
//	slow dependency, 1000/s ×   Fixed(1024)    1.00       701ms    703ms     0%        0%
//	  700ms (no CPU)            Fixed(16)      0.02       701ms    702ms    98%        0%
//	                            Adaptive       1.00       701ms    704ms     0%        0%
//	same, 1500/s × 900ms        Fixed(1024)    0.76       901ms    908ms    25%        0%
//	  (demand over 1024)        Adaptive       0.57       901ms    906ms    43%        0%
//
// Fixed(1024) collapses under CPU overload (1024 pages share the CPU, so
// each takes longer than the deadline); Adaptive keeps most of the
// capacity with ~100ms pages, behind a hand-tuned Fixed(16) only by its
// onset (the 1024 requests admitted before it cuts must drain). It never
// refuses at a healthy load and relaxes back to Max after an overload,
// and it tolerates a slow dependency as long as the demand stays under
// Max — where a small fixed limit refuses nearly everything. Its one
// regression: a slow dependency with demand over Max, where it cuts for
// about Settle before undoing the cut. With 2ms of CPU per page the
// in-process load generator, not the handler, is the bottleneck at 10×
// (rejections queue for seconds before the handler runs, file descriptors
// run out), so no admission policy can help there; at 3× the limiters
// keep goodput alike (0.83–0.86 of capacity), Fixed(16) and Adaptive with a
// P50 of 24ms against 1467ms for Fixed(1024), Adaptive's P99 (1.65s) still
// carrying the onset.
//
// Hence: Fixed(--max-inflight) stays the default; Adaptive is an opt-in for
// deployments whose pages cost real CPU and can be overloaded from outside.
package admission
