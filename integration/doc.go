// Package integration holds orderagg's container-level tests: the real
// binary, the simulators and Redis run as Docker containers on a private
// network per test, driven through testcontainers-go.
//
// The tests run as part of `go test ./...`. They need the two local images
// built by `make images` (orderagg:local and orderagg-redis:local, overridable
// with ORDERAGG_IMAGE and ORDERAGG_REDIS_IMAGE). Without Docker or an image,
// each test skips with a message naming `make images`; with CI=true it fails
// instead, so CI cannot go green on skipped integration tests.
//
// Ryuk, testcontainers' reaper, cannot be pulled on this project's machines,
// so TESTCONTAINERS_RYUK_DISABLED defaults to true here and every container
// and network is removed by the test that made it (t.Cleanup).
package integration
