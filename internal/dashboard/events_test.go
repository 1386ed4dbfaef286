package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/resilience"
	"github.com/orderagg/orderagg/internal/sim"
)

// report is what the tests read of a streamed report.
type report struct {
	DeadlineMS   int64 `json:"deadline_ms"`
	Dependencies []struct {
		Name string `json:"name"`
	} `json:"dependencies"`
}

func reportOf(t *testing.T, ev sse) report {
	t.Helper()
	var r report
	if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
		t.Fatalf("report %q: %v", ev.data, err)
	}
	return r
}

// A stream sends a report at once, then one every Interval, each newer
// than the one before.
func TestEventsSendAReportAtOnceAndEveryInterval(t *testing.T) {
	d := New(Options{Report: countingReport(), Interval: 5 * time.Millisecond})
	srv := newServer(t, d)
	events, _ := openEvents(t, srv)
	if ct, cc := events.resp.Header.Get("Content-Type"), events.resp.Header.Get("Cache-Control"); ct != "text/event-stream" || cc != "no-store" {
		t.Fatalf("Content-Type %q, Cache-Control %q", ct, cc)
	}
	if r := reportOf(t, events.must("report")); r.DeadlineMS != 1 || len(r.Dependencies) != 1 || r.Dependencies[0].Name != "logistics" {
		t.Fatalf("first report %+v", r)
	}
	for want := int64(2); want <= 5; want++ {
		if r := reportOf(t, events.must("report")); r.DeadlineMS != want {
			t.Fatalf("report %d, want %d", r.DeadlineMS, want)
		}
	}
}

// In demo mode the faults come once at the start and again only when they
// change; without it, never.
func TestEventsCarryFaultsWhenTheyChange(t *testing.T) {
	s := sim.New()
	d := New(Options{Report: countingReport(), Faults: s, Interval: 5 * time.Millisecond})
	events, _ := openEvents(t, newServer(t, d))
	events.must("report")
	var got map[string]sim.Fault
	if err := json.Unmarshal([]byte(events.must("faults").data), &got); err != nil || len(got) != len(sim.Services()) || got["logistics"] != healthy {
		t.Fatalf("first faults %v (%v)", got, err)
	}
	for range 3 { // unchanged: bare reports
		events.must("report")
	}
	if err := s.SetFault("logistics", sim.Fault{ErrorRate: 1, ErrorStatus: 503}); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := events.next()
		if err != nil {
			t.Fatalf("no faults event after a change: %v", err)
		}
		if ev.name == "faults" {
			if err := json.Unmarshal([]byte(ev.data), &got); err != nil || got["logistics"].ErrorRate != 1 || got["logistics"].ErrorStatus != 503 {
				t.Fatalf("changed faults %v (%v)", got, err)
			}
			break
		}
	}

	plain, _ := openEvents(t, newServer(t, New(Options{Report: countingReport(), Interval: 5 * time.Millisecond})))
	for range 3 {
		plain.must("report")
	}
}

// Close ends every stream with a closing event, refuses new ones with 503
// and Retry-After, and leaves the page served.
func TestCloseEndsStreamsAndRefusesNewOnes(t *testing.T) {
	d := New(Options{Report: countingReport(), Interval: time.Hour})
	srv := newServer(t, d)
	a, _ := openEvents(t, srv)
	b, _ := openEvents(t, srv)
	a.must("report")
	b.must("report")
	d.Close()
	for _, e := range []*eventReader{a, b} {
		e.must("closing")
		if ev, err := e.next(); !errors.Is(err, io.EOF) {
			t.Fatalf("after closing: %+v, %v; want the end of the stream", ev, err)
		}
	}
	w := do(t, d, http.MethodGet, "/dashboard/events", "")
	if code := errorCode(t, w, http.StatusServiceUnavailable); code != "UNAVAILABLE" || w.Header().Get("Retry-After") == "" {
		t.Errorf("stream after Close: code %s, Retry-After %q", code, w.Header().Get("Retry-After"))
	}
	if w := do(t, d, http.MethodGet, "/dashboard", ""); w.Code != http.StatusOK {
		t.Errorf("page after Close: status %d", w.Code)
	}
	d.Close() // idempotent
}

// Streams are bounded: with MaxStreams open, the next is refused at once
// with a JSON 503 TOO_MANY_STREAMS and Retry-After; HEAD takes no slot; a
// stream whose client leaves gives its slot back.
func TestEventStreamsAreBounded(t *testing.T) {
	for _, limit := range []int{3, 0} { // 0: DefaultMaxStreams
		t.Run(strconv.Itoa(limit), func(t *testing.T) {
			d := New(Options{Report: countingReport(), Interval: time.Hour, MaxStreams: limit})
			srv := newServer(t, d)
			want := limit
			if want == 0 {
				want = DefaultMaxStreams
			}
			cancels := make([]func(), 0, want)
			for range want {
				events, cancel := openEvents(t, srv)
				events.must("report")
				cancels = append(cancels, cancel)
			}
			refused := func() {
				t.Helper()
				resp, err := srv.Client().Get(srv.URL + "/dashboard/events")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var body handlers.ErrorBody
				if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusServiceUnavailable ||
					body.Error.Code != "TOO_MANY_STREAMS" || resp.Header.Get("Retry-After") == "" {
					t.Fatalf("stream %d: %d %+v (%v), Retry-After %q; want 503 TOO_MANY_STREAMS", want+1, resp.StatusCode, body, err, resp.Header.Get("Retry-After"))
				}
			}
			refused()
			if resp, err := srv.Client().Head(srv.URL + "/dashboard/events"); err != nil || resp.StatusCode != http.StatusOK ||
				resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("HEAD with every slot taken: %v %v", resp, err)
			}
			cancels[0]()
			openWhenFree(t, srv).must("report")
			refused()
		})
	}
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
		d.Close()
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

// reportAt is a one-dependency report generated at t whose success count
// is n, so a sample can be told from the next.
func reportAt(t time.Time, n int64) handlers.ResilienceReport {
	return handlers.ResilienceReport{GeneratedAt: t, DeadlineMS: 1500, Dependencies: []resilience.Snapshot{{
		Name: "logistics", Breaker: resilience.StateClosed, Counts: map[string]int64{"success": n, "failure": 0}, ErrorPercent: 1.5, WindowMS: 10000,
	}}}
}

func TestHistoryKeepsTheLastMinute(t *testing.T) {
	d := New(Options{Report: countingReport()})
	if got := d.reports(); got == nil || len(got) != 0 {
		t.Fatalf("empty history %#v, want an empty list", got)
	}
	t0 := time.Unix(1_700_000_000, 0).UTC()
	for i := range HistorySize + 10 {
		d.record(reportAt(t0.Add(time.Duration(i)*time.Second), int64(i)))
	}
	got := d.reports()
	if len(got) != HistorySize {
		t.Fatalf("%d samples, want %d", len(got), HistorySize)
	}
	for i, s := range got {
		want := int64(i + 10)
		if s.GeneratedAt != t0.Add(time.Duration(want)*time.Second) || s.Dependencies[0].Counts["success"] != want {
			t.Fatalf("sample %d: %+v, want the report of second %d (oldest first)", i, s, want)
		}
	}
}

// The first report of a stream carries the history, in the report's own
// field names, so the page draws it with the code that draws live reports;
// the reports after it do not repeat it.
func TestFirstReportCarriesHistory(t *testing.T) {
	d := New(Options{Report: countingReport(), Interval: 5 * time.Millisecond})
	t0 := time.Unix(1_700_000_000, 0).UTC()
	for i := range 3 {
		d.record(reportAt(t0.Add(time.Duration(i)*time.Second), int64(10+i)))
	}
	events, _ := openEvents(t, newServer(t, d))
	var first struct {
		DeadlineMS int64 `json:"deadline_ms"`
		History    []struct {
			GeneratedAt  time.Time `json:"generated_at"`
			Dependencies []struct {
				Name         string           `json:"name"`
				Counts       map[string]int64 `json:"counts"`
				ErrorPercent float64          `json:"error_percent"`
				WindowMS     int64            `json:"window_ms"`
			} `json:"dependencies"`
		} `json:"history"`
	}
	if err := json.Unmarshal([]byte(events.must("report").data), &first); err != nil {
		t.Fatal(err)
	}
	if first.DeadlineMS != 1 || len(first.History) != 3 {
		t.Fatalf("first report: deadline %d, %d samples; want the report and 3 samples", first.DeadlineMS, len(first.History))
	}
	for i, s := range first.History {
		dep := s.Dependencies[0]
		if !s.GeneratedAt.Equal(t0.Add(time.Duration(i)*time.Second)) || dep.Name != "logistics" || dep.Counts["success"] != int64(10+i) ||
			dep.ErrorPercent != 1.5 || dep.WindowMS != 10000 {
			t.Errorf("sample %d: %+v", i, s)
		}
	}
	var next map[string]json.RawMessage
	if err := json.Unmarshal([]byte(events.must("report").data), &next); err != nil {
		t.Fatal(err)
	}
	if _, ok := next["history"]; ok || string(next["deadline_ms"]) != "2" {
		t.Fatalf("second report %v: want the next report, without history", next)
	}
}

// Start samples at once, whether or not a stream is open, and Close stops
// it (goleak checks that it is gone); Start after Close does nothing.
func TestStartSamplesUntilClose(t *testing.T) {
	d := New(Options{Report: countingReport()})
	d.Start()
	d.Start() // a second call starts nothing more
	for len(d.reports()) == 0 {
		time.Sleep(time.Millisecond)
	}
	d.Close()
	n := len(d.reports())
	d.Start()
	if got := len(d.reports()); got != n {
		t.Fatalf("%d samples after Close, then %d after a Start; want none after Close", n, got)
	}
}
