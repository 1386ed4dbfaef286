package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/sim"
)

// fakeFaults is a FaultController that records what it was told, with the
// simulator's four services.
type fakeFaults struct {
	mu     sync.Mutex
	faults map[string]sim.Fault
	sets   int   // SetFault calls that succeeded
	resets int   // ResetFaults calls
	err    error // returned by SetFault when set
}

var _ FaultController = (*fakeFaults)(nil)

func newFakeFaults() *fakeFaults {
	f := &fakeFaults{faults: map[string]sim.Fault{}}
	for _, s := range sim.Services() {
		f.faults[s] = healthy
	}
	return f
}

func (f *fakeFaults) SetFault(service string, fault sim.Fault) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if _, ok := f.faults[service]; !ok {
		return fmt.Errorf("fake: %w %q", sim.ErrUnknownService, service)
	}
	f.faults[service] = fault
	f.sets++
	return nil
}

func (f *fakeFaults) ResetFaults() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.faults {
		f.faults[s] = healthy
	}
	f.resets++
}

func (f *fakeFaults) Faults() map[string]sim.Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.faults)
}

func (f *fakeFaults) fault(service string) sim.Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.faults[service]
}

func (f *fakeFaults) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeFaults) calls() (sets, resets int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sets, f.resets
}

// countingReport returns reports whose DeadlineMS counts the calls, so a
// test can tell one report from the next.
func countingReport() func() handlers.ResilienceReport {
	var mu sync.Mutex
	n := int64(0)
	return func() handlers.ResilienceReport {
		mu.Lock()
		defer mu.Unlock()
		n++
		return handlers.ResilienceReport{
			GeneratedAt: time.Unix(1_700_000_000, 0).UTC(),
			DeadlineMS:  n,
			Dependencies: []handlers.GuardReport{{
				Name: "logistics", Breaker: "CLOSED", Counts: map[string]int64{"success": n},
				Warnings: []string{},
			}},
		}
	}
}

// manualTicker hands out one tick channel shared by every stream: a send
// on it returns once a stream has taken the tick, so tests need no sleeps.
type manualTicker struct {
	c       chan time.Time
	mu      sync.Mutex
	stopped int
}

func newManualTicker() *manualTicker { return &manualTicker{c: make(chan time.Time)} }

func (m *manualTicker) newTicker(time.Duration) (<-chan time.Time, func()) {
	return m.c, func() {
		m.mu.Lock()
		m.stopped++
		m.mu.Unlock()
	}
}

// tick delivers one tick to a stream, failing the test if none takes it.
func (m *manualTicker) tick(t *testing.T) {
	t.Helper()
	select {
	case m.c <- time.Now():
	case <-time.After(5 * time.Second):
		t.Fatal("no stream took the tick within 5s")
	}
}

func do(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func decode[T any](t *testing.T, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("decoding %q: %v", w.Body.String(), err)
	}
	return v
}

// errorCode checks that w is a JSON error with status and returns its code.
func errorCode(t *testing.T, w *httptest.ResponseRecorder, status int) string {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d; body %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	var b handlers.ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.Error.Code == "" || b.Error.Message == "" {
		t.Fatalf("body %q is not a JSON error (%v)", w.Body, err)
	}
	return b.Error.Code
}

// sse is one server-sent event.
type sse struct {
	name string
	data string
}

// eventReader reads server-sent events off a live response.
type eventReader struct {
	t    *testing.T
	resp *http.Response
	br   *bufio.Reader
}

// openEvents starts GET /dashboard/events on srv. The request's context
// bounds every read, so a missing event fails the test instead of hanging
// it; cancel ends the stream from the client's side.
func openEvents(t *testing.T, srv *httptest.Server) (*eventReader, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/dashboard/events", nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	t.Cleanup(cancel)
	return &eventReader{t: t, resp: resp, br: bufio.NewReader(resp.Body)}, cancel
}

// next returns the next event, skipping field-only blocks such as retry:.
func (e *eventReader) next() (sse, error) {
	var ev sse
	for {
		line, err := e.br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.name != "" || ev.data != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if ev.data != "" {
				return ev, errors.New("more than one data line")
			}
			ev.data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "retry: "), strings.HasPrefix(line, ":"):
		default:
			return ev, fmt.Errorf("unexpected line %q", line)
		}
	}
}

// must returns the next event, which must be named name.
func (e *eventReader) must(name string) sse {
	e.t.Helper()
	ev, err := e.next()
	if err != nil {
		e.t.Fatalf("reading the %s event: %v", name, err)
	}
	if ev.name != name {
		e.t.Fatalf("got event %q (%s), want %q", ev.name, ev.data, name)
	}
	return ev
}

// logRecorder is a slog.Handler that passes every message to a channel, so
// tests can wait for something the code logs.
type logRecorder struct{ msgs chan string }

func newLogRecorder() *logRecorder { return &logRecorder{msgs: make(chan string, 100)} }

func (l *logRecorder) logger() *slog.Logger { return slog.New(l) }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	select {
	case l.msgs <- r.Message:
	default:
	}
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// waitFor waits (at most 5s) until msg is logged.
func (l *logRecorder) waitFor(t *testing.T, msg string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-l.msgs:
			if m == msg {
				return
			}
		case <-deadline:
			t.Fatalf("%q not logged within 5s", msg)
		}
	}
}
