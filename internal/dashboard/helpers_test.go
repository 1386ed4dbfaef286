package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/resilience"
	"github.com/orderagg/orderagg/internal/sim"
)

// healthy is the simulator's fault after a reset.
var healthy = sim.Fault{ErrorStatus: sim.DefaultErrorStatus}

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
			Dependencies: []resilience.Snapshot{{
				Name: "logistics", Breaker: resilience.StateClosed, Counts: map[string]int64{"success": n},
			}},
		}
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

// openWhenFree opens a stream on srv, retrying while every slot is taken
// (a stream whose client left frees its slot when its handler returns).
func openWhenFree(t *testing.T, srv *httptest.Server) *eventReader {
	t.Helper()
	for range 1000 {
		events, cancel := openEvents(t, srv)
		if events.resp.StatusCode == http.StatusOK {
			return events
		}
		cancel()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no stream slot freed")
	return nil
}
