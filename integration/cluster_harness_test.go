package integration

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Helpers for a Redis Cluster of local Redis containers. The cluster is
// driven with redis-cli executed inside its own containers (the image has
// no shell, but redis-cli is there): the nodes announce their addresses on
// the private network, which the service containers reach and the host's
// clients need not.

const (
	// clusterNodeTimeout is --cluster-node-timeout: how long a node may be
	// unreachable before the others flag it as failed.
	clusterNodeTimeout = 2 * time.Second
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
)

// clusterNode is one master of a test cluster.
type clusterNode struct {
	alias string // network alias, redis-1 …
	ip    string // address on the test network, announced to clients
	c     *testcontainers.DockerContainer
	slots [][2]int // inclusive slot ranges it serves
}

// owns reports whether the node serves slot.
func (n *clusterNode) owns(slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

func (n *clusterNode) String() string { return n.alias + "(" + n.ip + ")" }

// startRedisCluster runs n Redis containers in cluster mode on nw (aliases
// redis-1 … redis-n), joins them into one cluster of n masters without
// replicas (redis-cli --cluster create) and waits until every node reports
// cluster_state:ok with all slots served. extraArgs are added to every
// node's redis-server command line.
func startRedisCluster(t testing.TB, nw *testcontainers.DockerNetwork, n int, extraArgs ...string) []*clusterNode {
	t.Helper()
	img := images().Redis
	requireImages(t, img)
	args := append([]string{
		"--cluster-enabled", "yes",
		// /tmp, not /data: the image's /data is root's (COPY drops the
		// ownership build.sh gives it) and Redis runs as uid 65532.
		"--cluster-config-file", "/tmp/nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10),
		"--appendonly", "no",
	}, extraArgs...)
	nodes := make([]*clusterNode, n)
	for i := range nodes {
		alias := fmt.Sprintf("redis-%d", i+1)
		c := run(t, img, alias, nw,
			// The image's entrypoint is `redis-server /etc/redis.conf`
			// (bind 0.0.0.0, protected-mode no); these come after it.
			testcontainers.WithCmd(args...),
			testcontainers.WithExposedPorts(redisPort),
			testcontainers.WithWaitStrategy(
				wait.ForAll(
					wait.ForLog("Ready to accept connections"),
					wait.ForListeningPort(redisPort),
				).WithDeadline(startupTimeout),
			),
		)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ip, err := c.ContainerIP(ctx)
		cancel()
		if err != nil || ip == "" {
			t.Fatalf("IP of %s on the test network: %q, %v", alias, ip, err)
		}
		nodes[i] = &clusterNode{alias: alias, ip: ip, c: c}
	}

	create := []string{"redis-cli", "--cluster", "create"}
	for _, nd := range nodes {
		create = append(create, nd.ip+":6379")
	}
	create = append(create, "--cluster-replicas", "0", "--cluster-yes")
	out := redisCLI(t, nodes[0], create[1:]...)
	if !strings.Contains(out, "All 16384 slots covered") {
		t.Fatalf("redis-cli --cluster create: no full coverage:\n%s", out)
	}

	eventually(t, 30*time.Second, func() (bool, string) {
		for _, nd := range nodes {
			info := clusterInfo(t, nd)
			if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != strconv.Itoa(clusterSlots) ||
				info["cluster_known_nodes"] != strconv.Itoa(n) {
				return false, fmt.Sprintf("%s: cluster_state=%s slots_ok=%s known_nodes=%s", nd,
					info["cluster_state"], info["cluster_slots_ok"], info["cluster_known_nodes"])
			}
		}
		return true, ""
	})
	for _, nd := range nodes {
		nd.slots = mySlots(t, nd)
	}
	return nodes
}

// redisCLI runs redis-cli with args inside the node's container, against
// the node itself unless args say otherwise, and returns its output. A
// non-zero exit fails the test; redis-cli reports a Redis error reply with
// exit 0 and the error text as output.
func redisCLI(t testing.TB, nd *clusterNode, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, r, err := nd.c.Exec(ctx, append([]string{"/usr/bin/redis-cli"}, args...), tcexec.Multiplexed())
	if err != nil {
		t.Fatalf("redis-cli %v on %s: %v", args, nd, err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("redis-cli %v on %s: read output: %v", args, nd, err)
	}
	if code != 0 {
		t.Fatalf("redis-cli %v on %s: exit %d:\n%s", args, nd, code, b)
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\r", ""))
}

// clusterInfo is CLUSTER INFO of one node as field → value.
func clusterInfo(t testing.TB, nd *clusterNode) map[string]string {
	t.Helper()
	info := map[string]string{}
	for _, line := range strings.Split(redisCLI(t, nd, "CLUSTER", "INFO"), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			info[k] = v
		}
	}
	return info
}

// mySlots reads the slot ranges a node serves from its own line ("myself")
// of CLUSTER NODES.
func mySlots(t testing.TB, nd *clusterNode) [][2]int {
	t.Helper()
	out := redisCLI(t, nd, "CLUSTER", "NODES")
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !slices.Contains(strings.Split(f[2], ","), "myself") {
			continue
		}
		var ranges [][2]int
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") { // a slot being migrated
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: CLUSTER NODES slot %q", nd, s)
			}
			ranges = append(ranges, [2]int{a, b})
		}
		if len(ranges) == 0 {
			t.Fatalf("%s serves no slot:\n%s", nd, out)
		}
		return ranges
	}
	t.Fatalf("%s: no myself line in CLUSTER NODES:\n%s", nd, out)
	return nil
}

// ownerOf returns the node serving key's slot.
func ownerOf(t testing.TB, nodes []*clusterNode, key string) *clusterNode {
	t.Helper()
	slot := keySlot(key)
	for _, nd := range nodes {
		if nd.owns(slot) {
			return nd
		}
	}
	t.Fatalf("no node serves slot %d of %s", slot, key)
	return nil
}

// scanKeys lists the keys matching pattern stored on one node (SCAN is
// per node in a cluster).
func scanKeys(t testing.TB, nd *clusterNode, pattern string) []string {
	t.Helper()
	out := redisCLI(t, nd, "--scan", "--pattern", pattern)
	var keys []string
	for _, k := range strings.Split(out, "\n") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// keySlot is Redis Cluster's hash slot of a key: CRC16 (XMODEM) of the key,
// or of its hash tag (the part between the first '{' and the next '}' when
// not empty), modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key)) % clusterSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the one Redis
// Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// setNodeTimeout sets cluster-node-timeout on nodes at run time.
func setNodeTimeout(t testing.TB, nodes []*clusterNode, d time.Duration) {
	t.Helper()
	for _, nd := range nodes {
		ms := strconv.FormatInt(d.Milliseconds(), 10)
		if out := redisCLI(t, nd, "CONFIG", "SET", "cluster-node-timeout", ms); out != "OK" {
			t.Fatalf("CONFIG SET cluster-node-timeout %s on %s: %s", ms, nd, out)
		}
	}
}

// stopContainer stops a container (SIGTERM, then SIGKILL after 5 s).
func stopContainer(t testing.TB, c *testcontainers.DockerContainer, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	timeout := 5 * time.Second
	if err := c.Stop(ctx, &timeout); err != nil {
		t.Fatalf("stop %s: %v", what, err)
	}
}

// containerLog returns up to 1 MiB of a container's log.
func containerLog(t testing.TB, c *testcontainers.DockerContainer) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := c.Logs(ctx)
	if err != nil {
		t.Fatalf("container log: %v", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		t.Fatalf("container log: %v", err)
	}
	return string(b)
}
