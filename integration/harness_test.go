package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
	"go.uber.org/goleak"

	"github.com/orderagg/orderagg/build/testenv"
)

const (
	defaultServiceImage   = "orderagg:local"
	defaultRedisImage     = "orderagg-redis:local"
	defaultToxiproxyImage = "orderagg-toxiproxy:local"

	// Network aliases of the containers on a test's private network.
	redisAlias     = "redis"
	simAlias       = "sim"
	serviceAlias   = "orderagg"
	toxiproxyAlias = "toxiproxy"

	redisPort     = "6379/tcp"
	simPort       = "9100/tcp"
	servicePort   = "8080/tcp"
	toxiproxyPort = "8474/tcp" // Toxiproxy's API

	// configPath is where withConfig mounts a --config file in the service
	// container.
	configPath = "/etc/orderagg/config.yaml"

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
	Service   string // ORDERAGG_IMAGE, default orderagg:local
	Redis     string // ORDERAGG_REDIS_IMAGE, default orderagg-redis:local (redis:7 works where a registry is reachable)
	Toxiproxy string // ORDERAGG_TOXIPROXY_IMAGE, default orderagg-toxiproxy:local (ghcr.io/shopify/toxiproxy:2.x works too)
}

func images() testImages {
	return testImages{
		Service:   envOr("ORDERAGG_IMAGE", defaultServiceImage),
		Redis:     envOr("ORDERAGG_REDIS_IMAGE", defaultRedisImage),
		Toxiproxy: envOr("ORDERAGG_TOXIPROXY_IMAGE", defaultToxiproxyImage),
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// unavailable skips the test (or fails it in CI) because Docker or an image
// is missing.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...) +
		" — build the images with `make images` (or set ORDERAGG_IMAGE / ORDERAGG_REDIS_IMAGE / ORDERAGG_TOXIPROXY_IMAGE)"
	testenv.Missing(t, "integration: %s", msg)
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
	return startSimAs(t, nw, simAlias)
}

// startSimAs is startSim under another network alias, for a second sim
// container that serves only some of the downstreams.
func startSimAs(t testing.TB, nw *testcontainers.DockerNetwork, alias string) (*testcontainers.DockerContainer, string) {
	t.Helper()
	img := images().Service
	requireImages(t, img)
	c := run(t, img, alias, nw,
		testcontainers.WithCmd("sim", "--addr", ":9100"),
		testcontainers.WithExposedPorts(simPort),
		// The image's HEALTHCHECK probes the service's /readyz on :8080,
		// which a sim container does not serve (compose overrides it too).
		testcontainers.WithConfigModifier(func(cfg *container.Config) {
			cfg.Healthcheck = &container.HealthConfig{Test: []string{"NONE"}}
		}),
		testcontainers.WithWaitStrategy(
			wait.ForHTTP("/faults").WithPort(simPort).WithStartupTimeout(startupTimeout),
		),
	)
	return c, "http://" + endpoint(t, c, simPort)
}

// simURLOf returns the host base URL of a sim container, read again: after
// a Stop and Start its published port may have changed.
func simURLOf(t testing.TB, c *testcontainers.DockerContainer) string {
	t.Helper()
	return "http://" + endpoint(t, c, simPort)
}

// startToxiproxy runs the Toxiproxy image on nw (alias "toxiproxy") with its
// API published, and returns the container and a client of that API on the
// host. Proxies it is told to create listen on the private network, where
// other containers reach them as toxiproxy:<port>.
func startToxiproxy(t testing.TB, nw *testcontainers.DockerNetwork) (*testcontainers.DockerContainer, *toxiproxy.Client) {
	t.Helper()
	img := images().Toxiproxy
	requireImages(t, img)
	c := run(t, img, toxiproxyAlias, nw,
		testcontainers.WithExposedPorts(toxiproxyPort),
		// Errors only (a failed upstream dial, say): at info and warn it logs
		// every connection, which would bury the rest of a failed test's log.
		testcontainers.WithEnv(map[string]string{"LOG_LEVEL": "error"}),
		testcontainers.WithWaitStrategy(
			wait.ForHTTP("/version").WithPort(toxiproxyPort).WithStartupTimeout(startupTimeout),
		),
	)
	// The client uses http.DefaultTransport; drop its idle connections so
	// that goleak sees no transport goroutines once the tests end.
	t.Cleanup(func() {
		if tr, ok := http.DefaultTransport.(*http.Transport); ok {
			tr.CloseIdleConnections()
		}
	})
	return c, toxiproxy.NewClient(endpoint(t, c, toxiproxyPort))
}

// startService runs `orderagg serve` on nw (alias "orderagg"), wired to the
// sim and Redis containers of the same network, with env added on top (it
// may override the defaults) and opts after the harness's own (withConfig,
// for one). It waits for GET /readyz to answer 200 and returns the container
// and its base URL on the host.
func startService(t testing.TB, nw *testcontainers.DockerNetwork, env map[string]string, opts ...testcontainers.ContainerCustomizer) (*testcontainers.DockerContainer, string) {
	t.Helper()
	img := images().Service
	requireImages(t, img)
	full := map[string]string{
		"ORDERAGG_ADDR": ":8080",
		// Every registered downstream at the simulator; env may point one
		// elsewhere with its own ORDERAGG_<NAME>_URL.
		"ORDERAGG_DOWNSTREAMS_URL": "http://" + simAlias + ":9100",
		"ORDERAGG_REDIS_URL":       "redis://" + redisAlias + ":6379/0",
	}
	for k, v := range env {
		full[k] = v
	}
	base := []testcontainers.ContainerCustomizer{
		testcontainers.WithCmd("serve"),
		testcontainers.WithEnv(full),
		testcontainers.WithExposedPorts(servicePort),
		testcontainers.WithWaitStrategy(
			wait.ForHTTP("/readyz").WithPort(servicePort).WithStartupTimeout(startupTimeout),
		),
	}
	c := run(t, img, serviceAlias, nw, append(base, opts...)...)
	return c, "http://" + endpoint(t, c, servicePort)
}

// withConfig mounts yaml as the service's --config file (ORDERAGG_CONFIG).
// Keys left out keep their defaults (config.example.yaml).
func withConfig(yaml string) testcontainers.ContainerCustomizer {
	return testcontainers.CustomizeRequestOption(func(req *testcontainers.GenericContainerRequest) error {
		if err := testcontainers.WithFiles(testcontainers.ContainerFile{
			Reader:            strings.NewReader(yaml),
			ContainerFilePath: configPath,
			FileMode:          0o644, // the image runs as uid 65532
		})(req); err != nil {
			return err
		}
		return testcontainers.WithEnv(map[string]string{"ORDERAGG_CONFIG": configPath})(req)
	})
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
