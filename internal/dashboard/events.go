package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/sim"
)

// writeWait bounds one event's write, so that a client that stops reading
// cannot hold its handler (and a shutdown) forever, and lifts a server-wide
// WriteTimeout meant for ordinary answers.
const writeWait = 10 * time.Second

// serveEvents streams events until the client goes away, a write fails or
// Close is called.
func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead { // what a GET starts with, without a slot
		setStreamHeaders(w)
		return
	}
	if !d.admit(w) {
		return
	}
	defer func() { <-d.streams }()
	setStreamHeaders(w)
	rc := http.NewResponseController(w)
	send := func(text string) error {
		if err := rc.SetWriteDeadline(time.Now().Add(max(writeWait, 3*d.opts.Interval))); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		if _, err := w.Write([]byte(text)); err != nil {
			return err
		}
		return rc.Flush()
	}
	event := func(name string, v any) error {
		b, _ := json.Marshal(v) // plain data; json never writes a newline, so it fits one data: line
		return send("event: " + name + "\ndata: " + string(b) + "\n\n")
	}
	tick := time.NewTicker(d.opts.Interval)
	defer tick.Stop()
	var faults map[string]sim.Fault
	report := any(withHistory{d.opts.Report(), d.reports()}) // the charts start full
	if send("retry: 2000\n\n") != nil {                      // EventSource's reconnection delay, ms
		return
	}
	for {
		if event("report", report) != nil {
			return
		}
		if d.opts.Faults != nil { // sent when they change, whoever changed them
			if f := d.opts.Faults.Faults(); faults == nil || !maps.Equal(f, faults) {
				if event("faults", f) != nil {
					return
				}
				faults = f
			}
		}
		select {
		case <-tick.C:
			report = d.opts.Report()
		case <-r.Context().Done():
			return
		case <-d.closing:
			_ = event("closing", struct{}{}) // the page then says why the stream ends
			return
		}
	}
}

// admit takes a stream slot, or answers 503 (Retry-After) and reports
// false when the dashboard is closed or every slot is taken.
func (d *Dashboard) admit(w http.ResponseWriter) bool {
	select {
	case <-d.closing:
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the dashboard is shutting down")
		return false
	default:
	}
	select {
	case d.streams <- struct{}{}:
		return true
	default:
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "TOO_MANY_STREAMS",
			fmt.Sprintf("%d dashboard streams are open, the most this service allows; retry later", d.opts.MaxStreams))
		return false
	}
}

func setStreamHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // proxies such as nginx would hold events back
	w.WriteHeader(http.StatusOK)
}

// HistorySize is how many reports Start keeps, one a HistoryInterval.
const (
	HistorySize     = 60
	HistoryInterval = time.Second
)

// withHistory is a stream's first report, with the history oldest first.
type withHistory struct {
	handlers.ResilienceReport
	History []handlers.ResilienceReport `json:"history"`
}

// record adds r to the history, dropping the oldest beyond HistorySize.
func (d *Dashboard) record(r handlers.ResilienceReport) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.history = append(d.history, r)
	if len(d.history) > HistorySize {
		d.history = slices.Delete(d.history, 0, 1)
	}
}

// reports returns the history, oldest first; never nil.
func (d *Dashboard) reports() []handlers.ResilienceReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]handlers.ResilienceReport{}, d.history...)
}

// Start records the report now and every HistoryInterval until Close, so
// that a page opened during an incident shows how it began. Without Start,
// streams start with no history. A second call, or one after Close, does
// nothing.
func (d *Dashboard) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.closed {
		return
	}
	d.started = true
	d.sampler.Go(func() {
		tick := time.NewTicker(HistoryInterval)
		defer tick.Stop()
		for {
			d.record(d.opts.Report())
			select {
			case <-tick.C:
			case <-d.closing:
				return
			}
		}
	})
}
