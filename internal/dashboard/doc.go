// Package dashboard serves orderagg's live resilience page (contract §2,
// GET /dashboard): one tile per dependency with its breaker state, request
// rate, error percentage, latency against the sub-budget, bulkhead fill, the
// rolling-window count of every event kind and a one-minute chart.
//
// The page is a single HTML file embedded in the binary, with its CSS and
// JavaScript inline and no external assets, because the service must be
// inspectable on machines that reach nothing on the internet. It is fed by
// server-sent events rather than polling so that a tab costs one long-lived
// request, and the browser's EventSource reconnects by itself after a
// restart.
//
// # Routes
//
// A [Dashboard] is a plain http.Handler (wire it into echo with
// echo.WrapHandler on /dashboard and /dashboard/*):
//
//	GET    /dashboard                  the page (text/html)
//	GET    /dashboard/events           text/event-stream: "event: report" with the
//	                                   /v1/resilience document at once (the first one
//	                                   also carries "history", the last minute's samples)
//	                                   and then every Options.Interval; in demo mode also
//	                                   "event: faults" with the faults in force whenever
//	                                   they change. At most Options.MaxStreams at once;
//	                                   beyond, 503 TOO_MANY_STREAMS with Retry-After
//	GET    /dashboard/faults           the faults in force, keyed by service
//	DELETE /dashboard/faults           every service back to healthy
//	GET    /dashboard/faults/{service} that service's fault
//	PUT    /dashboard/faults/{service} set it; same body as the simulator's fault API
//	DELETE /dashboard/faults/{service} that service back to healthy
//
// The /dashboard/faults routes exist only in demo mode (Options.Faults set);
// otherwise they are 404, so a production service never exposes a way to
// break itself. Every error is JSON {"error":{"code":"…","message":"…"}}.
//
// # History
//
// [Dashboard.Start] samples the report once a second into a ring of the
// last minute (60 samples), whether or not anyone watches, so that a page
// opened during an incident shows how it began rather than empty charts.
//
// # Shutdown
//
// http.Server.Shutdown waits for active requests, and an event stream never
// ends on its own. [Dashboard.Close] ends every open stream and the sampler
// and waits until they have returned; register it with
// http.Server.RegisterOnShutdown.
package dashboard
