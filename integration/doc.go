// Package integration holds orderagg's container-level tests: the real
// binary, the simulators, Redis and Toxiproxy run as Docker containers on a
// private network per test, driven through testcontainers-go.
//
// # Running them here
//
// No image can be pulled on this project's machines, so the images are built
// locally first:
//
//	make images && go test ./integration/...
//
// `make images` builds orderagg:local (the FROM-scratch service image, which
// also runs `orderagg sim`), orderagg-redis:local (Redis from Debian's
// package, build/redis) and orderagg-toxiproxy:local (Toxiproxy's server
// compiled from its Go module, github.com/Shopify/toxiproxy/v2, static, FROM
// scratch; build/toxiproxy). `make test-integration` does both steps, with
// -race and -v. The whole package takes 1.5-2 min on a busy 2-core machine.
//
// # Images from a registry
//
// Where a registry is reachable, published images work too; each is named by
// an environment variable:
//
//	ORDERAGG_IMAGE=<a published orderagg build>      (default orderagg:local)
//	ORDERAGG_REDIS_IMAGE=redis:7                     (default orderagg-redis:local)
//	ORDERAGG_TOXIPROXY_IMAGE=ghcr.io/shopify/toxiproxy:2.12.0   (default orderagg-toxiproxy:local)
//
// Nothing is ever pulled by the tests themselves: pull the images first
// (docker pull). The local Toxiproxy image has the upstream layout (API on
// 8474, `-host=0.0.0.0`), so either works.
//
// # Missing prerequisites
//
// The tests run as part of `go test ./...`. Without Docker or an image, each
// test skips with a message naming `make images`; in CI ($CI true as
// strconv.ParseBool reads it, build/testenv) it fails instead, so CI
// cannot go green on skipped integration tests.
//
// # Ryuk and addresses
//
// Ryuk, testcontainers' reaper, cannot be pulled on this project's machines,
// so TESTCONTAINERS_RYUK_DISABLED defaults to true here and every container
// and network is removed by the test that made it (t.Cleanup).
// TESTCONTAINERS_HOST_OVERRIDE defaults to 127.0.0.1: the tests reach
// published ports on loopback only; containers talk to each other by alias on
// their private network.
//
// # Scenarios
//
//   - TestServiceSmoke, TestRedisImageAnswersPing: the images work.
//   - TestFullStackFaults: healthy page; inventory, coupon and logistics
//     failing, hanging and answering garbage; order down with a cached copy
//     (200, order from cache) and without (503); an unknown order (404).
//   - TestRedisSlowAndStopped: Redis behind Toxiproxy slowed by 2 s per
//     command, then stopped, then started: healthy latency unchanged,
//     degraded pages inside the deadline, the cache's breaker opening and
//     closing, the cache serving again without a service restart.
//   - TestDownstreamStoppedAndRestarted: a second sim container serving only
//     logistics, stopped and started: breaker OPEN, SHORT_CIRCUITED pages,
//     HALF_OPEN, CLOSED, and the transitions in /metrics.
//   - TestGracefulShutdownFinishesInFlight: docker stop with pages in flight;
//     all finish with 200 and the service exits 0.
//   - TestBreakerOpensWhileDependencyHangs: logistics hanging, pages one at
//     a time: CLOSED through the first nine timed-out pages, OPEN after the
//     tenth (the built-in consecutive_failures; the window holds fewer than
//     min_requests calls), then SHORT_CIRCUITED pages from the cache that
//     call nothing and finish, by the service's own histogram, below the
//     sub-budget every timed-out page spent.
//   - TestLoadWhileDependencyHangs: 8 clients for 4 s with logistics hanging
//     and its breaker kept closed: no answer past the deadline, no goroutine
//     growth in the service.
//   - TestRedisClusterSharedCacheAndNodeLoss: a three-node Redis Cluster from
//     the local image and two instances sharing it: B serves from the cache
//     what only A fetched; one master stopped: pages stay live, writes to its
//     slots (and only those) fail and are counted, its keys fall back; then
//     cluster_state:fail: every answer still 200 within the deadline.
//
// Each scenario logs its measured figures (latencies, times to open and close
// a breaker, goroutine counts); run with -v to see them.
package integration
