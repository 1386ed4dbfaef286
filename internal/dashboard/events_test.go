package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/sim"
)

// newServer serves d over real HTTP (streams need flushing and a client
// that can go away) and closes both at the end, d first so that no stream
// holds up the server's Close.
func newServer(t *testing.T, d *Dashboard) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	t.Cleanup(d.Close)
	return srv
}

func reportOf(t *testing.T, ev sse) handlers.ResilienceReport {
	t.Helper()
	var r handlers.ResilienceReport
	if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
		t.Fatalf("report %q: %v", ev.data, err)
	}
	return r
}

func TestEventsSendAReportAtOnceAndOnEveryTick(t *testing.T) {
	ticker := newManualTicker()
	d := New(Options{Report: countingReport(), newTicker: ticker.newTicker})
	srv := newServer(t, d)

	events, _ := openEvents(t, srv)
	if ct := events.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if cc := events.resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	// The first report comes before any tick: the page is filled at once.
	if r := reportOf(t, events.must("report")); r.DeadlineMS != 1 || len(r.Dependencies) != 1 || r.Dependencies[0].Name != "logistics" {
		t.Fatalf("first report %+v", r)
	}
	for want := int64(2); want <= 4; want++ {
		ticker.tick(t)
		if r := reportOf(t, events.must("report")); r.DeadlineMS != want {
			t.Fatalf("report %d after a tick, want %d", r.DeadlineMS, want)
		}
	}
}

// Without an injected ticker, reports keep coming at the interval.
func TestEventsUseTheInterval(t *testing.T) {
	d := New(Options{Report: countingReport(), Interval: 5 * time.Millisecond})
	srv := newServer(t, d)
	events, _ := openEvents(t, srv)
	for range 5 {
		events.must("report")
	}
}

func TestEventsCarryFaultsWhenTheyChange(t *testing.T) {
	ticker := newManualTicker()
	faults := newFakeFaults()
	d := New(Options{Report: countingReport(), Faults: faults, newTicker: ticker.newTicker})
	srv := newServer(t, d)
	events, _ := openEvents(t, srv)

	events.must("report")
	var got map[string]sim.Fault
	if err := json.Unmarshal([]byte(events.must("faults").data), &got); err != nil || len(got) != len(sim.Services()) || got["logistics"] != healthy {
		t.Fatalf("first faults %v (%v)", got, err)
	}
	// Unchanged faults are not repeated: two ticks, two bare reports.
	for range 2 {
		ticker.tick(t)
		events.must("report")
	}
	if err := faults.SetFault("logistics", sim.Fault{ErrorRate: 1, ErrorStatus: 503}); err != nil {
		t.Fatal(err)
	}
	// The stream may have seen the change already (its faults event comes
	// before the next report) or will on the round this tick starts.
	ticker.tick(t)
	ev, err := events.next()
	if err == nil && ev.name == "report" {
		ev, err = events.next()
	}
	if err != nil || ev.name != "faults" {
		t.Fatalf("after a change: %+v, %v; want a faults event", ev, err)
	}
	if err := json.Unmarshal([]byte(ev.data), &got); err != nil || got["logistics"].ErrorRate != 1 || got["logistics"].ErrorStatus != 503 {
		t.Fatalf("changed faults %v (%v)", got, err)
	}
}

func TestEventsWithoutDemoModeHaveNoFaults(t *testing.T) {
	ticker := newManualTicker()
	d := New(Options{Report: countingReport(), newTicker: ticker.newTicker})
	srv := newServer(t, d)
	events, _ := openEvents(t, srv)
	events.must("report")
	ticker.tick(t)
	events.must("report")
}

func TestStreamEndsWhenTheClientGoes(t *testing.T) {
	ticker := newManualTicker()
	logs := newLogRecorder()
	d := New(Options{Report: countingReport(), newTicker: ticker.newTicker, Logger: logs.logger()})
	srv := newServer(t, d)
	events, cancel := openEvents(t, srv)
	events.must("report")
	logs.waitFor(t, "dashboard stream started")
	cancel()
	logs.waitFor(t, "dashboard stream ended")
	ticker.mu.Lock()
	stopped := ticker.stopped
	ticker.mu.Unlock()
	if stopped != 1 {
		t.Errorf("ticker stopped %d times, want 1", stopped)
	}
}

func TestCloseEndsStreamsAndRefusesNewOnes(t *testing.T) {
	ticker := newManualTicker()
	d := New(Options{Report: countingReport(), newTicker: ticker.newTicker})
	srv := newServer(t, d)
	a, _ := openEvents(t, srv)
	b, _ := openEvents(t, srv)
	a.must("report")
	b.must("report")

	closed := make(chan struct{})
	go func() { d.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s with two open streams")
	}
	for _, e := range []*eventReader{a, b} {
		e.must("closing")
		if ev, err := e.next(); !errors.Is(err, io.EOF) {
			t.Fatalf("after closing: %+v, %v; want the end of the stream", ev, err)
		}
	}

	w := do(t, d, http.MethodGet, "/dashboard/events", "")
	if code := errorCode(t, w, http.StatusServiceUnavailable); code != codeUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("stream after Close: code %s, Retry-After %q", code, w.Header().Get("Retry-After"))
	}
	if w := do(t, d, http.MethodGet, "/dashboard", ""); w.Code != http.StatusOK {
		t.Errorf("page after Close: status %d", w.Code)
	}
	d.Close() // idempotent
}

// serveReal runs d on a real http.Server with the given WriteTimeout, the
// way the service does, and shuts it down at the end.
func serveReal(t *testing.T, d *Dashboard, writeTimeout time.Duration) (*http.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d, ReadHeaderTimeout: time.Second, WriteTimeout: writeTimeout}
	srv.RegisterOnShutdown(d.Close)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		d.Close() // also waits for the goroutine Shutdown started for it
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, "http://" + ln.Addr().String()
}

func openURL(t *testing.T, url string) *eventReader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &eventReader{t: t, resp: resp, br: bufio.NewReader(resp.Body)}
}

// The way the service wires it: Close registered with RegisterOnShutdown
// lets Shutdown finish although a browser tab holds a stream open.
func TestServerShutdownIsNotHeldByStreams(t *testing.T) {
	d := New(Options{Report: countingReport(), Interval: time.Hour})
	srv, base := serveReal(t, d, 0)
	events := openURL(t, base+"/dashboard/events")
	events.must("report")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with an open stream: %v", err)
	}
	events.must("closing")
}

// A server-wide WriteTimeout is meant for ordinary answers; a stream extends
// its own write deadline, so it outlives it. Ten reports 20ms apart take at
// least 180ms, well past the server's 50ms.
func TestStreamOutlivesServerWriteTimeout(t *testing.T) {
	d := New(Options{Report: countingReport(), Interval: 20 * time.Millisecond})
	_, base := serveReal(t, d, 50*time.Millisecond)
	events := openURL(t, base+"/dashboard/events")
	start := time.Now()
	for range 10 {
		events.must("report")
	}
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
		t.Fatalf("ten reports in %v: the test did not outlast the WriteTimeout", elapsed)
	}
}
