package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/orderagg/orderagg/internal/sim"
)

// retryMS is the reconnection delay the stream asks EventSource to use: a
// restarted service is usually back within a couple of seconds, and the
// browser's own default (about 3 s) leaves the page stale for longer.
const retryMS = 2000

// minWriteWait bounds how long one event may take to reach the client. A
// client that stops reading (a suspended laptop, a stuck proxy) would
// otherwise hold its handler, and so a server shutdown, indefinitely. It
// also lifts a server-wide WriteTimeout, which is meant for ordinary
// requests and would cut every stream after a few seconds.
const minWriteWait = 10 * time.Second

// serveEvents streams reports until the client goes away, a write fails or
// Close is called. It runs on the server's goroutine for the request and
// starts none of its own.
func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	if r.Method == http.MethodHead {
		// What a GET would start with, without taking a slot.
		setStreamHeaders(w.Header())
		w.WriteHeader(http.StatusOK)
		return
	}
	if !d.admitStream(w, r) {
		return
	}
	defer d.releaseStream()

	s := &stream{w: w, rc: http.NewResponseController(w), wait: max(minWriteWait, 3*d.interval)}
	setStreamHeaders(w.Header())
	w.WriteHeader(http.StatusOK)

	ctx := r.Context()
	d.log.DebugContext(ctx, "dashboard stream started", "remote", r.RemoteAddr)
	defer d.log.DebugContext(ctx, "dashboard stream ended", "remote", r.RemoteAddr)
	d.pushReports(ctx, s)
}

// admitStream takes a stream slot, or answers 503 and reports false when
// the dashboard is closing or every slot is taken.
func (d *Dashboard) admitStream(w http.ResponseWriter, r *http.Request) bool {
	d.mu.Lock()
	closed, full := d.closed, d.open >= d.maxStreams
	if !closed && !full {
		d.open++
		d.streams.Add(1)
	}
	d.mu.Unlock()
	// The refusals are written outside the lock: a write may block.
	switch {
	case closed:
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the dashboard is shutting down")
		return false
	case full:
		d.log.DebugContext(r.Context(), "dashboard stream refused: too many open", "max", d.maxStreams, "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
		writeError(w, http.StatusServiceUnavailable, codeTooManyStreams,
			fmt.Sprintf("%d dashboard streams are open, the most this service allows; retry later", d.maxStreams))
		return false
	}
	return true
}

// releaseStream gives back the slot admitStream took.
func (d *Dashboard) releaseStream() {
	d.mu.Lock()
	d.open--
	d.mu.Unlock()
	d.streams.Done()
	d.streamEnded()
}

// pushReports writes a report every interval, and the faults whenever they
// change, until ctx ends, a write fails or Close is called.
func (d *Dashboard) pushReports(ctx context.Context, s *stream) {
	tick, stop := d.ticker(d.interval)
	defer stop()
	var lastFaults map[string]sim.Fault
	if err := s.raw(fmt.Sprintf("retry: %d\n\n", retryMS)); err != nil {
		return
	}
	// The first report carries the last minute, so the page's charts start
	// full instead of as empty boxes.
	var report any = withHistory{ResilienceReport: d.report(), History: d.history.samples()}
	for {
		if err := s.event("report", report); err != nil {
			return
		}
		if d.faults != nil {
			// Sent only when they change, so a second tab (or a curl to
			// the simulator's own fault API) shows up without a poll.
			if f := d.faults.Faults(); lastFaults == nil || !maps.Equal(f, lastFaults) {
				if err := s.event("faults", f); err != nil {
					return
				}
				lastFaults = f
			}
		}
		select {
		case <-tick:
			report = d.report()
		case <-ctx.Done():
			return
		case <-d.closing:
			// Tell the page why the stream ends, so it can say the server
			// is going away rather than that the network broke. Best effort:
			// the stream is ending either way.
			_ = s.event("closing", struct{}{})
			return
		}
	}
}

// streamRetryAfter is the Retry-After, in seconds, of a stream refused for
// want of a slot: streams are long-lived, so one frees rarely soon.
const streamRetryAfter = 5

func setStreamHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	// Reverse proxies such as nginx buffer responses by default, which
	// would hold every event back.
	h.Set("X-Accel-Buffering", "no")
}

// stream writes server-sent events to one client.
type stream struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	wait time.Duration
	buf  bytes.Buffer
}

// event writes one event whose data is v as JSON. json.Marshal never
// emits a newline, so the data always fit on the one data: line.
func (s *stream) event(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("dashboard: encoding %s event: %w", name, err)
	}
	s.buf.Reset()
	s.buf.WriteString("event: ")
	s.buf.WriteString(name)
	s.buf.WriteString("\ndata: ")
	s.buf.Write(b)
	s.buf.WriteString("\n\n")
	return s.write(s.buf.Bytes())
}

func (s *stream) raw(text string) error { return s.write([]byte(text)) }

// write sends p at once. A ResponseWriter that cannot set deadlines (a
// test recorder, some middleware) still streams, just without the bound.
func (s *stream) write(p []byte) error {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.wait)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if _, err := s.w.Write(p); err != nil {
		return err
	}
	return s.rc.Flush()
}
