package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
	"go.uber.org/goleak"
)

const (
	defaultServiceImage = "orderagg:local"
	defaultRedisImage   = "orderagg-redis:local"

	// Network aliases of the containers on a test's private network.
	redisAlias   = "redis"
	simAlias     = "sim"
	serviceAlias = "orderagg"

	redisPort   = "6379/tcp"
	simPort     = "9100/tcp"
	servicePort = "8080/tcp"

	startupTimeout = 60 * time.Second
)

func TestMain(m *testing.M) {
	// Ryuk cannot be pulled here; tests clean up after themselves.
	if _, ok := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !ok {
		_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	// Published ports are reached on loopback: the Docker engine of this
	// project's machines runs in the tests' own network namespace. Without
	// the override testcontainers sees /.dockerenv, looks for a gateway and
	// may fall back to the machine's default route, which is not a Docker
	// host. Set TESTCONTAINERS_HOST_OVERRIDE to use a remote engine.
	if _, ok := os.LookupEnv("TESTCONTAINERS_HOST_OVERRIDE"); !ok {
		_ = os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	}
	goleak.VerifyTestMain(m, leakOptions()...)
}

// leakOptions ignores the goroutines that the Docker client's HTTP transport
// and testcontainers keep for the life of the process; anything else that
// outlives the tests is a leak.
func leakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	}
}

// testImages names the images the integration tests run.
type testImages struct {
	Service string // ORDERAGG_IMAGE, default orderagg:local
	Redis   string // ORDERAGG_REDIS_IMAGE, default orderagg-redis:local (redis:7 works where a registry is reachable)
}

func images() testImages {
	return testImages{
		Service: envOr("ORDERAGG_IMAGE", defaultServiceImage),
		Redis:   envOr("ORDERAGG_REDIS_IMAGE", defaultRedisImage),
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// inCI reports whether missing prerequisites must fail rather than skip.
func inCI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// unavailable skips the test (or fails it in CI) because Docker or an image
// is missing.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) +
		" — build the images with `make images` (or set ORDERAGG_IMAGE / ORDERAGG_REDIS_IMAGE)"
	if inCI() {
		t.Fatalf("integration prerequisites missing in CI: %s", msg)
	}
	t.Skipf("skipping integration test: %s", msg)
}

var docker struct {
	once sync.Once
	cli  *testcontainers.DockerClient
	err  error
}

func dockerClient() (*testcontainers.DockerClient, error) {
	docker.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			docker.err = err
			return
		}
		if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
			docker.err = err
			return
		}
		docker.cli = cli
	})
	return docker.cli, docker.err
}

// requireImages skips (or, in CI, fails) the test unless Docker answers and
// every named image is present locally. Nothing is ever pulled.
func requireImages(t testing.TB, names ...string) {
	t.Helper()
	cli, err := dockerClient()
	if err != nil {
		unavailable(t, "Docker is not reachable (is the engine running?): %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range names {
		if _, err := cli.ImageInspect(ctx, name); err != nil {
			unavailable(t, "image %q is not present locally (%v)", name, err)
			return
		}
	}
}

// newNetwork creates a private bridge network for one test and removes it
// when the test ends (after the containers on it, cleanups being LIFO).
func newNetwork(t testing.TB) *testcontainers.DockerNetwork {
	t.Helper()
	requireImages(t) // Docker itself
	nw, err := network.New(context.Background())
	testcontainers.CleanupNetwork(t, nw) // before the error check
	if err != nil {
		t.Fatalf("create network: %v", err)
	}
	return nw
}

// run starts a container from a local image and always schedules its removal;
// on a failed test its log is written to the test log first.
func run(t testing.TB, image, alias string, nw *testcontainers.DockerNetwork, opts ...testcontainers.ContainerCustomizer) *testcontainers.DockerContainer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startupTimeout+15*time.Second)
	defer cancel()
	opts = append(opts, network.WithNetwork([]string{alias}, nw))
	c, err := testcontainers.Run(ctx, image, opts...)
	testcontainers.CleanupContainer(t, c) // before the error check
	if c != nil {
		// Registered after CleanupContainer, so it runs before the removal.
		t.Cleanup(func() {
			if t.Failed() {
				dumpLogs(t, alias, c)
			}
		})
	}
	if err != nil {
		t.Fatalf("start %s (%s): %v", alias, image, err)
	}
	return c
}

func dumpLogs(t testing.TB, alias string, c *testcontainers.DockerContainer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := c.Logs(ctx)
	if err != nil {
		t.Logf("%s logs: %v", alias, err)
		return
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 64<<10))
	t.Logf("---- %s container log ----\n%s", alias, b)
}

// endpoint returns host:port of a container's published port.
func endpoint(t testing.TB, c *testcontainers.DockerContainer, port string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ep, err := c.PortEndpoint(ctx, port, "")
	if err != nil {
		t.Fatalf("endpoint of %s: %v", port, err)
	}
	return ep
}

// startRedis runs the Redis image on nw (alias "redis") and returns the
// container and its host address (host:port) for clients in the test.
func startRedis(t testing.TB, nw *testcontainers.DockerNetwork) (*testcontainers.DockerContainer, string) {
	t.Helper()
	img := images().Redis
	requireImages(t, img)
	c := run(t, img, redisAlias, nw,
		testcontainers.WithExposedPorts(redisPort),
		testcontainers.WithWaitStrategy(
			wait.ForAll(
				wait.ForLog("Ready to accept connections"),
				wait.ForListeningPort(redisPort),
			).WithDeadline(startupTimeout),
		),
	)
	return c, endpoint(t, c, redisPort)
}

// startSim runs `orderagg sim --addr :9100` on nw (alias "sim") and returns
// the container and its base URL on the host (for fault injection).
func startSim(t testing.TB, nw *testcontainers.DockerNetwork) (*testcontainers.DockerContainer, string) {
	t.Helper()
	img := images().Service
	requireImages(t, img)
	c := run(t, img, simAlias, nw,
		testcontainers.WithCmd("sim", "--addr", ":9100"),
		testcontainers.WithExposedPorts(simPort),
		testcontainers.WithWaitStrategy(
			wait.ForHTTP("/faults").WithPort(simPort).WithStartupTimeout(startupTimeout),
		),
	)
	return c, "http://" + endpoint(t, c, simPort)
}

// startService runs `orderagg serve` on nw (alias "orderagg"), wired to the
// sim and Redis containers of the same network, with env added on top (it
// may override the defaults). It waits for GET /readyz to answer 200 and
// returns the container and its base URL on the host.
func startService(t testing.TB, nw *testcontainers.DockerNetwork, env map[string]string) (*testcontainers.DockerContainer, string) {
	t.Helper()
	img := images().Service
	requireImages(t, img)
	simURL := "http://" + simAlias + ":9100"
	full := map[string]string{
		"ORDERAGG_ADDR":          ":8080",
		"ORDERAGG_ORDER_URL":     simURL,
		"ORDERAGG_INVENTORY_URL": simURL,
		"ORDERAGG_COUPON_URL":    simURL,
		"ORDERAGG_LOGISTICS_URL": simURL,
		"ORDERAGG_REDIS_URL":     "redis://" + redisAlias + ":6379/0",
	}
	for k, v := range env {
		full[k] = v
	}
	c := run(t, img, serviceAlias, nw,
		testcontainers.WithCmd("serve"),
		testcontainers.WithEnv(full),
		testcontainers.WithExposedPorts(servicePort),
		testcontainers.WithWaitStrategy(
			wait.ForHTTP("/readyz").WithPort(servicePort).WithStartupTimeout(startupTimeout),
		),
	)
	return c, "http://" + endpoint(t, c, servicePort)
}

// httpClient is shared by the tests; its idle connections are closed when
// each test ends so that goleak sees no transport goroutines.
var httpClient = &http.Client{Timeout: 10 * time.Second}

func get(t testing.TB, url string) (*http.Response, []byte) {
	t.Helper()
	t.Cleanup(httpClient.CloseIdleConnections)
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp, body
}

// trimBody shortens a body for failure messages.
func trimBody(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}
