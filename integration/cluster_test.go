package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// sectionKeys are the section names in last-good keys.
var sectionKeys = []string{"order", "inventory", "coupons", "logistics"}

// redisClusterConfig keeps the inventory breaker closed (neither its window
// nor its consecutive-failure trip can open it), its last-good entries for
// 10 min, and gives each last-good read 400 ms instead of 50 ms (each
// fallback_timeout must exceed it, and so must --reserve, redisClusterReserve);
// see TestRedisClusterSharedCacheAndNodeLoss.
const redisClusterReserve = "450ms"

const redisClusterConfig = `
dependencies:
  cache:
    timeout: 400ms
  order:
    fallback_timeout: 500ms
  inventory:
    fallback_timeout: 500ms
    cache_max_age: 10m
    breaker:
      min_requests: 100000
      consecutive_failures: 100000
  coupon:
    fallback_timeout: 500ms
  logistics:
    fallback_timeout: 500ms
`

// Two service instances share a three-master Redis Cluster (no replicas)
// as their last-good cache, then lose one master.
//
//   - Shared state: pages of 27 orders asked only through instance A are
//     cached in the cluster, their inventory keys spread over all three
//     masters (checked node by node with SCAN); with inventory failing,
//     instance B, which never saw nine of those orders, serves each
//     inventory section from the cache, with A's data and as_of.
//   - One master stopped, not yet detected: every page from both instances
//     is 200 within the deadline. With the downstreams healthy every section
//     is live, the writes to the survivors' slots are stored and those to
//     the stopped master's fail, counted in /metrics and logged, never seen
//     by a request. With inventory failing, the orders whose key lives on a
//     surviving master still come from the cache and the others fall back
//     to the semantic default (UNKNOWN). The survivors' node timeout is
//     raised to 10 min just before the stop, so this window, which lasts
//     --cluster-node-timeout (2 s) plus gossip in production, stays open
//     for as long as the checks take.
//   - cluster_state:fail: the node timeout back at 2 s, the survivors flag
//     the stopped master as failed and, its slots being uncovered (Redis's
//     default cluster-require-full-coverage yes, no replica to promote),
//     refuse every command with CLUSTERDOWN. Every inventory section falls
//     back, healthy pages stay live, all within the deadline.
//
// The failing inventory service is the means, not the subject: its breaker
// never opens (so every failed page is a failed call followed by a cache
// read, reason FAILURE; by default ten failures in a row would open it and
// the sections would say SHORT_CIRCUITED, TestBreakerOpensWhileDependencyHangs
// covers that) and its entries live 10 min instead of 60 s, so a slow
// machine cannot see them expire mid-test. Likewise the 50 ms the cache
// allows a read is not what is tested: B's first read from each master
// opens a connection, and a loaded machine can take longer than that to
// dial and greet, turning a cached section into a default. A read of the
// stopped master still fails, cut at 400 ms (pages stay far inside the
// deadline), and CLUSTERDOWN is an answer at once.
//
// Each phase that reads the cache asks for orders of its own (ids, phase 2;
// ids4, phase 4; ids5, phase 5), all cached by A in phase 1, so that no
// phase's outcome depends on what an earlier one read.
func TestRedisClusterSharedCacheAndNodeLoss(t *testing.T) {
	requireImages(t, images().Service, images().Redis)
	testStart := time.Now()
	nw := newNetwork(t)
	nodes := startRedisCluster(t, nw, 3)
	for _, nd := range nodes {
		t.Logf("cluster node %s serves slots %v", nd, nd.slots)
	}
	dead, survivors := nodes[2], nodes[:2]

	_, simURL := startSim(t, nw)
	// Both URL forms of a cluster: A names every master as a seed; B names
	// one (a survivor) as the configuration endpoint and learns the rest.
	svcA, baseA := startService(t, nw, map[string]string{
		"ORDERAGG_REDIS_URL": "redis://redis-1:6379?addr=redis-2:6379&addr=redis-3:6379",
		"ORDERAGG_RESERVE":   redisClusterReserve,
	}, withConfig(redisClusterConfig))
	svcB, baseB := startService(t, nw, map[string]string{
		"ORDERAGG_REDIS_URL": "redis://redis-1:6379?cluster=true",
		"ORDERAGG_RESERVE":   redisClusterReserve,
	}, withConfig(redisClusterConfig))
	instances := []struct {
		name, base string
	}{{"A", baseA}, {"B", baseB}}
	t.Logf("cluster, sim and two instances up in %v", time.Since(testStart).Round(time.Millisecond))

	// Three orders per master for each phase that reads the cache, chosen
	// by the slot of their inventory key.
	const perNode = 3
	owner := map[string]*clusterNode{} // order id → master of its inventory key
	byNode := map[*clusterNode][]string{}
	ids := spreadIDs(t, nodes, "o-cl", perNode, owner, byNode)
	ids4 := spreadIDs(t, nodes, "o-c4", perNode, owner, byNode)
	ids5 := spreadIDs(t, nodes, "o-c5", perNode, owner, byNode)
	warmedIDs := slices.Concat(ids, ids4, ids5)

	// Phase 1: pages through A only, everything live.
	live := map[string]answer{}
	for _, id := range warmedIDs {
		a := order(t, baseA, id)
		requireHealthy(t, a)
		live[id] = a
	}
	warmed := time.Now()
	// Each master holds exactly the inventory keys its slots call for.
	eventually(t, 15*time.Second, func() (bool, string) {
		for _, nd := range nodes {
			var want []string
			for _, id := range byNode[nd] {
				want = append(want, lastGoodKey(depInventory, id))
			}
			slices.Sort(want)
			if got := scanKeys(t, nd, lastGoodKey(depInventory, "*")); !slices.Equal(got, want) {
				return false, fmt.Sprintf("inventory keys on %s: %v, want %v", nd, got, want)
			}
		}
		return true, ""
	})
	var perNodeKeys []string
	for _, nd := range nodes {
		perNodeKeys = append(perNodeKeys, fmt.Sprintf("%s: %d", nd.alias, len(scanKeys(t, nd, lastGoodKey("*", "*")))))
	}
	t.Logf("phase 1: %d orders through A, all live; last-good keys per master (all sections) %s; inventory keys %d per master",
		len(warmedIDs), strings.Join(perNodeKeys, ", "), len(byNode[nodes[0]]))

	// Phase 2: inventory failing; B serves A's answers from the cluster.
	setFault(t, simURL, depInventory, `{"error_rate":1}`)
	hitsBefore := cacheCounter(t, baseB, "orderagg_cache_reads_total", "hit")
	var phase2 []time.Duration
	for _, id := range ids {
		a := order(t, baseB, id)
		s := requireInventory(t, a, "cache")
		want := live[id].Page.Inventory
		if s.Status != want.Status || !bytes.Equal(compactJSON(t, s.Items), compactJSON(t, want.Items)) {
			t.Errorf("%v: cached inventory %s %s differs from the one A saw live: %s %s", a, s.Status, s.Items, want.Status, want.Items)
		}
		asOf, err := time.Parse(time.RFC3339, s.AsOf)
		if err != nil || asOf.Before(testStart.Add(-2*time.Second)) || asOf.After(warmed.Add(2*time.Second)) {
			t.Errorf("%v: cached as_of %q (%v), want the time A fetched it, between %v and %v", a, s.AsOf, err, testStart, warmed)
		}
		requireOthersLive(t, a, depInventory)
		phase2 = append(phase2, a.Latency)
	}
	if hits := cacheCounter(t, baseB, "orderagg_cache_reads_total", "hit") - hitsBefore; hits < float64(len(ids)) {
		t.Errorf("B counted %v cache hits for %d pages served from the cache", hits, len(ids))
	}
	t.Logf("phase 2: B served inventory of all %d orders from the cluster (keys on all 3 masters); slowest page %s",
		len(ids), ms(slices.Max(phase2)))

	// Phase 3: one master stopped, downstreams healthy.
	clearFaults(t, simURL)
	// The writes so far have settled (A's four sections and B's three live
	// ones of each order), so that the counts below are phase 3's alone.
	waitForWrites(t, baseA, len(sectionKeys)*len(warmedIDs))
	waitForWrites(t, baseB, (len(sectionKeys)-1)*len(ids))
	writeErrsBefore, writeOKBefore := map[string]float64{}, map[string]float64{}
	for _, in := range instances {
		writeErrsBefore[in.name] = cacheCounter(t, in.base, "orderagg_cache_writes_total", "error")
		writeOKBefore[in.name] = cacheCounter(t, in.base, "orderagg_cache_writes_total", "ok")
	}
	setNodeTimeout(t, survivors, 10*time.Minute)
	stopStart := time.Now()
	stopContainer(t, dead.c, dead.alias)
	stopped := time.Now()
	t.Logf("phase 3: stopped %s (slots %v) in %v", dead, dead.slots, stopped.Sub(stopStart).Round(time.Millisecond))
	lat := map[string][]time.Duration{} // phase → latencies of every page after the stop
	// Orders not seen yet, a set of its own per instance, each asked once:
	// each instance writes every section of its orders once, so what it
	// counted can be compared with what the survivors hold. (A second page
	// would write the failed sections again: a failed write is not marked
	// stored.)
	prefix := map[string]string{"A": "o-cx", "B": "o-cz"}
	fresh := map[string][]string{}
	for _, in := range instances {
		fresh[in.name] = spreadIDs(t, nodes, prefix[in.name], perNode, nil, nil)
	}
	for _, in := range instances {
		for _, id := range fresh[in.name] {
			a := order(t, in.base, id)
			requireHealthy(t, a)
			lat["healthy, node down"] = append(lat["healthy, node down"], a.Latency)
		}
	}
	for _, in := range instances {
		written := len(sectionKeys) * len(fresh[in.name])
		deadKeys, want := 0, map[*clusterNode][]string{}
		for _, id := range fresh[in.name] {
			for _, sec := range sectionKeys {
				k := lastGoodKey(sec, id)
				if nd := ownerOf(t, nodes, k); nd == dead {
					deadKeys++
				} else {
					want[nd] = append(want[nd], k)
				}
			}
		}
		// The survivors hold every key of their slots: those writes worked.
		eventually(t, 10*time.Second, func() (bool, string) {
			for _, nd := range survivors {
				w := slices.Sorted(slices.Values(want[nd]))
				if got := scanKeys(t, nd, lastGoodKey("*", prefix[in.name]+"*")); !slices.Equal(got, w) {
					return false, fmt.Sprintf("instance %s: keys on %s: %v, want %v", in.name, nd, got, w)
				}
			}
			return true, ""
		})
		// Wait until every write has settled.
		var failed, ok float64
		eventually(t, 10*time.Second, func() (bool, string) {
			failed = cacheCounter(t, in.base, "orderagg_cache_writes_total", "error") - writeErrsBefore[in.name]
			ok = cacheCounter(t, in.base, "orderagg_cache_writes_total", "ok") - writeOKBefore[in.name]
			return failed+ok >= float64(written), fmt.Sprintf("instance %s: %v failed + %v ok cache writes counted of the %d sections written",
				in.name, failed, ok, written)
		})
		t.Logf("phase 3: instance %s wrote %d sections: %d to the stopped master's slots, %d stored on the survivors (SCAN); /metrics counts %v failed, %v ok",
			in.name, written, deadKeys, written-deadKeys, failed, ok)
		// Exactly: a write the survivors stored must not be counted (and
		// logged) as lost because the same batch held a key of the stopped
		// master.
		if failed != float64(deadKeys) || ok != float64(written-deadKeys) {
			t.Errorf("instance %s counted %v failed and %v ok cache writes; want %d failed (the keys of the stopped %s) and %d ok (the keys the survivors hold)",
				in.name, failed, ok, deadKeys, dead, written-deadKeys)
		}
	}
	t.Logf("phase 3: every page live; %s", summary(lat["healthy, node down"]))

	// Phase 4: node still down, inventory failing. Survivors' keys come
	// from the cache; the stopped master's fall back to the default.
	setFault(t, simURL, depInventory, `{"error_rate":1}`)
	readErrsBefore := map[string]float64{}
	for _, in := range instances {
		readErrsBefore[in.name] = cacheCounter(t, in.base, "orderagg_cache_reads_total", "error")
	}
	var fromCache, fellBack int
	for range 2 {
		for _, in := range instances {
			for _, id := range ids4 {
				a := order(t, in.base, id)
				if owner[id] == dead {
					requireInventory(t, a, "fallback")
					requireFallbackShape(t, a, depInventory)
					fellBack++
				} else {
					requireInventory(t, a, "cache")
					fromCache++
				}
				requireOthersLive(t, a, depInventory)
				lat["inventory down, node down"] = append(lat["inventory down, node down"], a.Latency)
			}
		}
	}
	for _, in := range instances {
		n := cacheCounter(t, in.base, "orderagg_cache_reads_total", "error") - readErrsBefore[in.name]
		c := resilienceOf(t, in.base, depCache)
		if n <= 0 {
			t.Errorf("instance %s counted no failed cache read while reading keys of the stopped %s", in.name, dead)
		}
		if c.Counts["timeout"]+c.Counts["failure"] <= 0 {
			t.Errorf("instance %s: /v1/resilience cache counts %v show no timeout or failure", in.name, c.Counts)
		}
		t.Logf("phase 4: instance %s: %v failed cache reads in /metrics; /v1/resilience cache breaker %s, counts %v",
			in.name, n, c.Breaker, c.Counts)
	}
	t.Logf("phase 4: %d inventory sections from the cache (surviving masters), %d semantic defaults (%s); %s",
		fromCache, fellBack, dead.alias, summary(lat["inventory down, node down"]))

	// Phase 5: the survivors notice: cluster_state:fail.
	for _, nd := range survivors {
		if st := clusterInfo(t, nd)["cluster_state"]; st != "ok" {
			t.Fatalf("%s: cluster_state %s before the node timeout was restored; phases 3 and 4 ran in the wrong state", nd, st)
		}
	}
	setNodeTimeout(t, survivors, clusterNodeTimeout)
	restored := time.Now()
	eventually(t, 30*time.Second, func() (bool, string) {
		for _, nd := range survivors {
			if st := clusterInfo(t, nd)["cluster_state"]; st != "fail" {
				return false, fmt.Sprintf("%s: cluster_state %s", nd, st)
			}
		}
		return true, ""
	})
	t.Logf("phase 5: cluster_state:fail on both survivors %v after the node timeout was set back to %v",
		time.Since(restored).Round(time.Millisecond), clusterNodeTimeout)
	for range 2 {
		for _, in := range instances {
			for _, id := range ids5 {
				a := order(t, in.base, id)
				requireInventory(t, a, "fallback")
				requireFallbackShape(t, a, depInventory)
				requireOthersLive(t, a, depInventory)
				lat["inventory down, cluster fail"] = append(lat["inventory down, cluster fail"], a.Latency)
			}
		}
	}
	for _, in := range instances {
		c := resilienceOf(t, in.base, depCache)
		t.Logf("phase 5: instance %s: cache breaker %s, counts in its window: %d timeout, %d failure, %d short_circuited, %d success",
			in.name, c.Breaker, c.Counts["timeout"], c.Counts["failure"], c.Counts["short_circuited"], c.Counts["success"])
	}
	t.Logf("phase 5, inventory failing: every inventory section a semantic default; %s", summary(lat["inventory down, cluster fail"]))

	clearFaults(t, simURL)
	// Orders not seen yet: every section is written, and every write fails
	// (CLUSTERDOWN on the survivors, no answer from the stopped master).
	cy := spreadIDs(t, nodes, "o-cy", perNode, nil, nil)
	for _, in := range instances {
		writeErrsBefore[in.name] = cacheCounter(t, in.base, "orderagg_cache_writes_total", "error")
	}
	for _, in := range instances {
		for _, id := range cy {
			a := order(t, in.base, id)
			requireHealthy(t, a)
			lat["healthy, cluster fail"] = append(lat["healthy, cluster fail"], a.Latency)
		}
	}
	for _, in := range instances {
		want := float64(len(cy) * len(sectionKeys))
		eventually(t, 10*time.Second, func() (bool, string) {
			n := cacheCounter(t, in.base, "orderagg_cache_writes_total", "error") - writeErrsBefore[in.name]
			return n >= want, fmt.Sprintf("instance %s counted %v failed cache writes for %v sections written with the cluster down", in.name, n, want)
		})
	}
	// Some concurrency: 4 clients, both instances, 10 pages each.
	var (
		mu    sync.Mutex
		conc  []time.Duration
		errs  []error
		wg    sync.WaitGroup
		ctx   = t.Context()
		burst = 10
	)
	for c := range 4 {
		wg.Go(func() {
			base := instances[c%2].base
			for i := range burst {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				a, err := fetchOrder(rctx, httpClient, base, cy[(c*burst+i)%len(cy)])
				cancel()
				if err == nil {
					err = checkAnswer(a)
				}
				if err == nil && a.Status != http.StatusOK {
					err = fmt.Errorf("%v: want 200", a)
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					conc = append(conc, a.Latency)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Cleanup(httpClient.CloseIdleConnections)
	for _, err := range errs {
		t.Error(err)
	}
	lat["healthy, cluster fail"] = append(lat["healthy, cluster fail"], conc...)
	t.Logf("phase 5, healthy: every section live; %s (4 concurrent clients included)", summary(lat["healthy, cluster fail"]))

	// The failed writes are logged (at a bounded rate) by both instances.
	for _, in := range []struct {
		name string
		log  string
	}{{"A", containerLog(t, svcA)}, {"B", containerLog(t, svcB)}} {
		line := firstLine(in.log, "last-good cache write failed")
		if line == "" {
			t.Errorf("instance %s logged no failed cache write", in.name)
			continue
		}
		t.Logf("instance %s log: %s", in.name, trimBody([]byte(line)))
	}

	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	t.Logf("after the stop: %s over all phases; test took %v", summary(all), time.Since(testStart).Round(time.Millisecond))
}

// spreadIDs returns perNode order ids per master, prefix followed by a
// number, chosen by the slot of their inventory key. When owner and byNode
// are not nil it records there the master of each id and the ids of each
// master.
func spreadIDs(t testing.TB, nodes []*clusterNode, prefix string, perNode int, owner map[string]*clusterNode, byNode map[*clusterNode][]string) []string {
	t.Helper()
	count := map[*clusterNode]int{}
	var ids []string
	for i := 0; len(ids) < perNode*len(nodes) && i < 1000; i++ {
		id := fmt.Sprintf("%s%03d", prefix, i)
		nd := ownerOf(t, nodes, lastGoodKey(depInventory, id))
		if count[nd] == perNode {
			continue
		}
		count[nd]++
		ids = append(ids, id)
		if owner != nil {
			owner[id] = nd
		}
		if byNode != nil {
			byNode[nd] = append(byNode[nd], id)
		}
	}
	if len(ids) != perNode*len(nodes) {
		t.Fatalf("found only %d %s… ids spread over the masters: %v", len(ids), prefix, ids)
	}
	return ids
}

// requireInventory fails unless the inventory section of a 200 page has the
// given source, for reason FAILURE (the inventory service is failing).
func requireInventory(t testing.TB, a answer, source string) *section {
	t.Helper()
	return requireSection(t, a, depInventory, source, "FAILURE")
}

// requireOthersLive fails unless every section but dep is live.
func requireOthersLive(t testing.TB, a answer, dep string) {
	t.Helper()
	for name, s := range a.Page.sections() {
		if name != dep && s.Source != "live" {
			t.Errorf("%v: section %s is %s (%s), want live", a, name, s.Source, s.Reason)
		}
	}
}

// cacheCounter reads one outcome of a cache counter from /metrics (0 when
// it has not been exported yet).
func cacheCounter(t testing.TB, base, name, outcome string) float64 {
	t.Helper()
	v, _ := metric(scrape(t, base), name, map[string]string{"outcome": outcome})
	return v
}

// waitForWrites waits until an instance has settled (stored, skipped,
// dropped or failed) at least n cache writes since it started.
func waitForWrites(t testing.TB, base string, n int) {
	t.Helper()
	eventually(t, 10*time.Second, func() (bool, string) {
		var sum float64
		for _, outcome := range []string{"ok", "stale", "dropped", "error"} {
			sum += cacheCounter(t, base, "orderagg_cache_writes_total", outcome)
		}
		return sum >= float64(n), fmt.Sprintf("%s: %v cache writes settled, want %d", base, sum, n)
	})
}

// summary describes a set of page latencies.
func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no pages"
	}
	return fmt.Sprintf("%d pages, P50 %s, P99 %s, max %s", len(ds), ms(percentile(ds, 50)), ms(percentile(ds, 99)), ms(slices.Max(ds)))
}

// firstLine returns the first line of s containing sub, or "".
func firstLine(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// The hash slots computed by the harness are Redis Cluster's (values from
// CLUSTER KEYSLOT and the cluster specification).
func TestRedisClusterKeySlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]int{"foo": 12182, "hello": 866, "123456789": 0x31C3 % clusterSlots} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	if a, b := keySlot("{user1000}.following"), keySlot("user1000"); a != b {
		t.Errorf("hash tag ignored: %d vs %d", a, b)
	}
	if got, want := keySlot("foo{}{bar}"), int(crc16("foo{}{bar}"))%clusterSlots; got != want {
		t.Errorf("keySlot with an empty hash tag = %d, want %d (the whole key)", got, want)
	}
}
