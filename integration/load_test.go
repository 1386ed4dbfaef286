package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// loadConfig makes every logistics call wait as long as a page can afford:
// its sub-budget is raised to 1200 ms (under the 1400 ms the 1500 ms deadline
// minus the 100 ms reserve leaves, with 200 ms to spare: a call that starts
// late on a loaded machine is still cut by its own budget, TIMEOUT, not by
// the page's, DEADLINE), and its breaker never opens (neither
// its window nor its consecutive-timeout trip, which by default would open
// it after the first ten timeouts: TestBreakerOpensWhileDependencyHangs), so
// no call is spared by a short circuit. Each page then leaves at about 1.2 s
// plus a cache read: close to the deadline, which is the point.
const loadConfig = `
dependencies:
  logistics:
    timeout: 1200ms
    breaker:
      min_requests: 1000000
      consecutive_failures: 1000000
`

const (
	loadClients  = 8
	loadDuration = 4 * time.Second
	loadIDs      = 16 // distinct orders the clients cycle through
	// goroutineSlack is how many more goroutines than before the load the
	// service may keep once it is over: a few for connections and timers
	// that outlive a request by design, far fewer than one per page served
	// (there were ~25 pages, each holding at least one goroutine while hung).
	goroutineSlack = 10
)

// Load while logistics hangs: 8 clients for 4 s. No answer leaves after the
// deadline (server side: the request-duration histogram; host side: the
// deadline plus clientMargin, with the /healthz round trip measured during
// the load for comparison), every page is 200 with logistics degraded by
// TIMEOUT and the rest live, and the service's goroutines return to where
// they were: hung calls are cancelled, not leaked.
func TestLoadWhileDependencyHangs(t *testing.T) {
	requireImages(t, images().Service, images().Redis)
	nw := newNetwork(t)
	startRedis(t, nw)
	_, simURL := startSim(t, nw)
	_, base := startService(t, nw, nil, withConfig(loadConfig))

	client := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: loadClients, MaxConnsPerHost: loadClients},
		Timeout:   10 * time.Second,
	}
	t.Cleanup(client.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Warm up with the same clients, every downstream healthy: connection
	// pools (host→service, service→downstreams, service→Redis) fill and the
	// cache holds a last good logistics answer for most of the orders.
	warm := runLoad(ctx, client, base, time.Second)
	if err := warm.firstErr(); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	for _, a := range warm.answers {
		requireHealthy(t, a)
	}
	client.CloseIdleConnections()
	before := settledGoroutines(t, base)

	setFault(t, simURL, depLogistics, `{"hang":true}`)

	// /healthz round trips during the load: the network and scheduling
	// margin a client on the host sees, measured.
	probeCtx, stopProbe := context.WithCancel(ctx)
	var rtts []time.Duration
	var peak int
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for probeCtx.Err() == nil {
			start := time.Now()
			if code, err := probe(probeCtx, base+"/healthz"); err == nil && code == http.StatusOK {
				rtts = append(rtts, time.Since(start))
			}
			select {
			case <-probeCtx.Done():
			case <-time.After(100 * time.Millisecond): // probe interval
			}
		}
	}()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for probeCtx.Err() == nil {
			if n, err := goroutinesOnce(probeCtx, base); err == nil {
				peak = max(peak, n)
			}
			select {
			case <-probeCtx.Done():
			case <-time.After(250 * time.Millisecond): // sample interval
			}
		}
	}()
	load := runLoad(ctx, client, base, loadDuration)
	stopProbe()
	<-probed
	<-sampled
	if err := load.firstErr(); err != nil {
		t.Fatalf("load: %v", err)
	}

	// Every answer: 200, logistics cut by its sub-budget, the rest live.
	var lat []time.Duration
	sources := map[string]int{}
	for _, a := range load.answers {
		if err := checkAnswer(a); err != nil {
			t.Error(err)
			continue
		}
		if a.Status != http.StatusOK {
			t.Errorf("%v: want 200", a)
			continue
		}
		s := a.Page.Logistics
		if s.Reason != "TIMEOUT" || s.Source == "live" {
			t.Errorf("%v: logistics %s/%s, want degraded by TIMEOUT", a, s.Source, s.Reason)
		}
		if s.Source == "fallback" {
			requireFallbackShape(t, a, depLogistics)
		}
		sources[s.Source]++
		for _, dep := range []string{depOrder, depInventory, depCoupon} {
			if s := a.Page.sections()[dep]; s.Source != "live" {
				t.Errorf("%v: section %s is %s/%s, want live", a, dep, s.Source, s.Reason)
			}
		}
		lat = append(lat, a.Latency)
	}
	if len(load.answers) < loadClients*2 {
		t.Errorf("only %d pages in %v with %d clients", len(load.answers), loadDuration, loadClients)
	}
	maxLat := slices.Max(lat)
	if maxLat > deadline+clientMargin {
		t.Errorf("slowest page %s on the host: over the %v deadline + %v margin", ms(maxLat), deadline, clientMargin)
	}

	// Server side: the request-duration histogram has nothing above 1.5 s.
	m := scrape(t, base)
	total, _ := metric(m, "orderagg_http_request_duration_seconds_count", nil)
	within, _ := metric(m, "orderagg_http_request_duration_seconds_bucket", map[string]string{"le": "1.5"})
	if total == 0 || within != total {
		t.Errorf("orderagg_http_request_duration_seconds: %v of %v answers within 1.5 s, want all", within, total)
	}
	timeouts, _ := metric(m, "orderagg_dependency_events_total", map[string]string{"dependency": depLogistics, "event": "timeout"})

	// Goroutines: back to where they were once the load is over (the hang
	// is still set; nothing is in flight).
	client.CloseIdleConnections()
	var after int
	eventually(t, 10*time.Second, func() (bool, string) {
		after = goroutines(t, base)
		return after <= before+goroutineSlack, fmt.Sprintf("service goroutines %d after the load, %d before (slack %d, peak %d)", after, before, goroutineSlack, peak)
	})
	clearFaults(t, simURL)

	t.Logf("load: %d clients × %v with logistics hanging (sub-budget 1200 ms): %d pages (%d warm-up), logistics %v, %v logistics timeouts",
		loadClients, loadDuration, len(load.answers), len(warm.answers), sources, timeouts)
	t.Logf("latency on the host: p50 %s, p99 %s, max %s (deadline %v + margin %v); server histogram: %v of %v within 1.5 s",
		ms(percentile(lat, 50)), ms(percentile(lat, 99)), ms(maxLat), deadline, clientMargin, within, total)
	t.Logf("/healthz round trip during the load (the measured margin): p50 %s, max %s over %d probes",
		ms(percentile(rtts, 50)), ms(percentile(rtts, 100)), len(rtts))
	t.Logf("service goroutines: %d before, peak %d during, %d after", before, peak, after)
}

// loadResult is what runLoad's clients saw.
type loadResult struct {
	answers []answer
	errs    []error
}

func (r loadResult) firstErr() error {
	if len(r.errs) > 0 {
		return fmt.Errorf("%d requests failed, first: %w", len(r.errs), r.errs[0])
	}
	return nil
}

// runLoad runs loadClients closed-loop clients for d, cycling through
// loadIDs orders, and waits for every request to finish.
func runLoad(ctx context.Context, client *http.Client, base string, d time.Duration) loadResult {
	var (
		mu  sync.Mutex
		res loadResult
		wg  sync.WaitGroup
	)
	end := time.Now().Add(d)
	for c := range loadClients {
		wg.Go(func() {
			for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
				id := fmt.Sprintf("o-ld%03d", (c+i*loadClients)%loadIDs)
				a, err := fetchOrder(ctx, client, base, id)
				mu.Lock()
				if err != nil {
					res.errs = append(res.errs, err)
				} else {
					res.answers = append(res.answers, a)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return res
}

// probe GETs url and returns the status.
func probe(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// goroutinesOnce reads go_goroutines without the testing.TB (any goroutine).
func goroutinesOnce(ctx context.Context, base string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go_goroutines "); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("no go_goroutines in /metrics")
}

// settledGoroutines reads go_goroutines until two readings 200 ms apart
// agree (connections just closed take a moment to be noticed), bounded.
func settledGoroutines(t testing.TB, base string) int {
	t.Helper()
	prev := goroutines(t, base)
	var n int
	eventually(t, 5*time.Second, func() (bool, string) {
		time.Sleep(150 * time.Millisecond) // with eventually's 50 ms: readings 200 ms apart
		n = goroutines(t, base)
		ok := n == prev
		prev = n
		return ok, fmt.Sprintf("go_goroutines still moving (%d)", n)
	})
	return n
}
