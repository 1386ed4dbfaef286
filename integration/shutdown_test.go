package integration

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// `docker stop` (SIGTERM) while pages are in flight: the service stops
// accepting, finishes every page it has begun — each waiting 500 ms on the
// order service — and exits 0.
func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	requireImages(t, images().Service, images().Redis)
	nw := newNetwork(t)
	startRedis(t, nw)
	_, simURL := startSim(t, nw)
	svc, base := startService(t, nw, nil)

	const inFlight = 8
	const orderLatency = 500 * time.Millisecond
	setFault(t, simURL, depOrder, fmt.Sprintf(`{"latency_ms":%d}`, orderLatency.Milliseconds()))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before, err := simRequests(ctx, simURL, depOrder)
	if err != nil {
		t.Fatal(err)
	}

	// Own client: each page on its own connection, closed when done.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	answers := make([]answer, inFlight)
	errs := make([]error, inFlight)
	ended := make([]time.Time, inFlight)
	var wg sync.WaitGroup
	for i := range inFlight {
		wg.Go(func() {
			answers[i], errs[i] = fetchOrder(ctx, client, base, fmt.Sprintf("o-gs%03d", i))
			ended[i] = time.Now()
		})
	}
	t.Cleanup(wg.Wait) // never leave a request goroutine behind, even on failure

	// Every page has reached the order service: all are inside the service.
	eventually(t, 5*time.Second, func() (bool, string) {
		n, err := simRequests(ctx, simURL, depOrder)
		return err == nil && n-before >= inFlight, fmt.Sprintf("%d of %d pages at the order service (err %v)", n-before, inFlight, err)
	})

	stopTimeout := 10 * time.Second
	stopStart := time.Now()
	if err := svc.Stop(ctx, &stopTimeout); err != nil {
		t.Fatalf("docker stop: %v", err)
	}
	stopTook := time.Since(stopStart)
	wg.Wait()
	// SIGTERM must have landed while every page was still in flight, or
	// this run proved nothing.
	for i, e := range ended {
		if !e.After(stopStart) {
			t.Fatalf("page %d ended %v before docker stop began: the test was too slow to stop the service mid-flight", i, stopStart.Sub(e))
		}
	}

	for i := range inFlight {
		if errs[i] != nil {
			t.Errorf("page %d in flight at SIGTERM: %v", i, errs[i])
			continue
		}
		a := answers[i]
		if err := checkAnswer(a); err != nil {
			t.Errorf("page %d: %v", i, err)
			continue
		}
		if a.Status != http.StatusOK {
			t.Errorf("page %d: %v; want 200", i, a)
			continue
		}
		for name, s := range a.Page.sections() {
			if s.Source != "live" {
				t.Errorf("page %d: %v: section %s is %s/%s, want live (the drain must not cut it short)", i, a, name, s.Source, s.Reason)
			}
		}
		if a.Latency < orderLatency {
			t.Errorf("page %d took %v, less than the order service's %v", i, a.Latency, orderLatency)
		}
	}

	st, err := svc.State(ctx)
	if err != nil {
		t.Fatalf("container state: %v", err)
	}
	if st.Running || st.ExitCode != 0 || st.OOMKilled {
		t.Errorf("after docker stop: running=%v exit code %d oom=%v; want exited 0", st.Running, st.ExitCode, st.OOMKilled)
	}
	// Killed at the stop timeout would mean the drain hung.
	if stopTook >= stopTimeout {
		t.Errorf("docker stop took %v: the service did not exit before the %v kill", stopTook, stopTimeout)
	}
	var slowest time.Duration
	for _, a := range answers {
		slowest = max(slowest, a.Latency)
	}
	t.Logf("%d pages in flight at SIGTERM: all 200 and live, slowest %s; docker stop took %v; exit code %d",
		inFlight, ms(slowest), stopTook.Round(time.Millisecond), st.ExitCode)
}
