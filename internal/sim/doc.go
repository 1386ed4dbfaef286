// Package sim is a simulator of orderagg's four downstream services — order,
// inventory, coupon and logistics — with fault injection, so that the
// service's degradation can be shown and tested without the real ones.
//
// All four services live on one base URL with distinct path prefixes, so the
// same base URL is given to all four --*-url flags of `orderagg serve`.
//
// # Wire API
//
// Every answer is JSON (Content-Type: application/json). Errors, including
// injected ones, are {"error":{"code":"…","message":"…"}}.
//
//	GET {base}/order/v1/orders/{id}
//	    200 {"id","user_id","status","created_at","currency","total_cents",
//	         "items":[{"sku","name","quantity","unit_price_cents"}],
//	         "shipping_address":{"name","line1","city","postal_code","country"}}
//	GET {base}/inventory/v1/orders/{id}/stock
//	    200 {"order_id","items":[{"sku","available"}]}        one item per SKU of the order
//	GET {base}/coupon/v1/orders/{id}/coupons
//	    200 {"order_id","coupons":[{"code","description","discount_cents","expires_at"}]}   0–3 coupons
//	GET {base}/logistics/v1/orders/{id}/shipment
//	    200 {"order_id","status","carrier","tracking_number","eta","events":[{"at","location","description"}]}
//	        status is PREPARING (no tracking_number, no events yet), IN_TRANSIT,
//	        OUT_FOR_DELIVERY or DELIVERED, following the order's status.
//
// Timestamps are RFC 3339 in UTC. An id that starts with "nf-" does not
// exist: every service answers 404 {"error":{"code":"NOT_FOUND",…}} for it.
//
// Data are deterministic functions of the order id (FNV-1a of the id seeds a
// splitmix64 stream; timestamps are offsets from a fixed epoch, never
// time.Now), so two runs, or two processes, return byte-identical bodies.
// The inventory, coupons and shipment of an id are derived from its order:
// stock is listed for exactly the order's SKUs, discounts never exceed the
// order's total and the shipment follows the order's status. [OrderFor],
// [StockFor], [CouponsFor] and [ShipmentFor] return the same data as Go
// values, so tests can compare against them.
//
// # Budget header
//
// A client may send X-Budget-Ms: <n>, the milliseconds it is still willing to
// wait. The simulator then stops any injected wait (latency, jitter, hang)
// when that budget runs out and answers 504 {"error":{"code":"BUDGET_EXHAUSTED",…}},
// because nobody is listening any more; it also stops, answering nothing,
// when the client goes away. A malformed or negative header is ignored.
//
// # Fault control
//
//	PUT    /faults/{service}   body {"latency_ms":0,"jitter_ms":0,"error_rate":0,"error_status":500,"hang":false,"corrupt":false}
//	                           omitted fields take those defaults; answers the fault now in force
//	GET    /faults/{service}   that service's fault
//	DELETE /faults/{service}   that service back to healthy
//	GET    /faults             {"order":{…},"inventory":{…},"coupon":{…},"logistics":{…}}
//	DELETE /faults             all four back to healthy
//	GET    /stats              {"order":{"requests":N},…}: every physical request to a
//	                           service's paths since start, including the ones that then
//	                           failed, hung or were malformed
//
// service is order, inventory, coupon or logistics; anything else is 400
// UNKNOWN_SERVICE. A body with unknown fields, wrong types, trailing data or
// out-of-range values (latency_ms and jitter_ms 0..600000, error_rate 0..1,
// error_status 400..599) is 400 INVALID_FAULT and changes nothing.
//
// A request to a faulty service goes through these steps in order:
//  1. wait: hang holds it until the client goes away or its budget runs
//     out; otherwise it waits latency_ms plus a uniform 0..jitter_ms;
//  2. error: with probability error_rate it answers error_status;
//  3. the answer: 404 for nf- ids; with corrupt, 200 with the first half of
//     the real JSON body (a truncated object that every JSON decoder must
//     reject), else the real body.
//
// The same faults can be set from Go with [Server.SetFault], which the
// dashboard's demo mode and in-process tests use.
//
// # Shutdown
//
// A waiting handler returns as soon as its request's context is cancelled.
// http.Server.Shutdown does not cancel in-flight requests, so call
// [Server.Close] (for example through http.Server.RegisterOnShutdown) to
// release held requests at once.
package sim
