// Package dashboard serves orderagg's live resilience page, GET /dashboard:
// one tile per dependency with its breaker, rates, latency against the
// sub-budget, bulkhead and event counts, and a one-minute chart. The page is
// one embedded HTML file with no external assets, fed by server-sent events:
//
//	GET /dashboard                the page
//	GET /dashboard/events         "report", the /v1/resilience document, at once (the first with
//	                              "history", the last minute's reports) and every Interval; in demo
//	                              mode "faults", the simulator's faults, whenever they change;
//	                              "closing" at shutdown. At most MaxStreams at once; beyond, 503
//	                              TOO_MANY_STREAMS with Retry-After
//	/dashboard/faults[/{service}] demo mode only (else 404): the simulator's fault API (package sim)
//
// Every error is JSON {"error":{"code":"…","message":"…"}}. The fault
// controls change state only by PUT and DELETE, which the service's host
// guard refuses from other origins.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/sim"
)

// Defaults of Options.
const (
	DefaultInterval   = time.Second // the contract asks for an update at least once a second
	DefaultMaxStreams = 100
)

// Options configures a Dashboard. Only Report is required.
type Options struct {
	// Report builds the /v1/resilience document, once per stream per
	// Interval: it must be cheap and safe for concurrent use.
	Report func() handlers.ResilienceReport
	// Faults turns on demo mode: the fault controls act on this simulator.
	Faults *sim.Server
	// Interval between two reports on a stream; default DefaultInterval.
	Interval time.Duration
	// MaxStreams bounds the open event streams; default DefaultMaxStreams.
	MaxStreams int
}

// Dashboard serves the page, its event stream and, in demo mode, the fault
// controls; build it with New. It is safe for concurrent use.
type Dashboard struct {
	opts    Options
	page    []byte
	csp     string
	mux     *http.ServeMux
	streams chan struct{} // a slot per open stream
	closing chan struct{} // closed by Close
	sampler sync.WaitGroup

	mu              sync.Mutex // orders Start's sampler.Go before Close's Wait
	started, closed bool
	history         []handlers.ResilienceReport // oldest first, at most HistorySize
}

//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("page").Parse(pageHTML))

// New builds a dashboard. It panics without opts.Report, as
// http.HandleFunc does for a nil handler: a wiring mistake.
func New(opts Options) *Dashboard {
	if opts.Report == nil {
		panic("dashboard: New needs Options.Report")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	d := &Dashboard{opts: opts, mux: http.NewServeMux(),
		streams: make(chan struct{}, opts.MaxStreams), closing: make(chan struct{})}
	var page bytes.Buffer
	data := struct {
		Demo       bool
		IntervalMS int64
	}{opts.Faults != nil, opts.Interval.Milliseconds()}
	if err := pageTemplate.Execute(&page, data); err != nil {
		panic("dashboard: rendering the page: " + err.Error())
	}
	d.page, d.csp = page.Bytes(), contentSecurityPolicy(page.Bytes())

	get := []string{http.MethodGet, http.MethodHead}
	d.route("/dashboard", get, d.servePage)
	d.route("/dashboard/{$}", get, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/dashboard", http.StatusMovedPermanently) // one address for the page's URLs
	})
	d.route("/dashboard/events", get, d.serveEvents)
	if opts.Faults != nil { // else the fault routes are 404 like any unknown path
		faults := func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "no-store")
			http.StripPrefix("/dashboard", opts.Faults).ServeHTTP(w, r)
		}
		d.route("/dashboard/faults", append(get, http.MethodDelete), faults)
		d.route("/dashboard/faults/{service}", append(get, http.MethodPut, http.MethodDelete), faults)
	}
	d.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, handlers.CodeNotFound, "no such path: "+r.URL.Path)
	})
	return d
}

// route serves pattern for methods, and a JSON 405 naming them for others.
func (d *Dashboard) route(pattern string, methods []string, h http.HandlerFunc) {
	d.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(methods, r.Method) {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeError(w, http.StatusMethodNotAllowed, handlers.CodeMethodNotAllowed, r.Method+" is not allowed here")
			return
		}
		h(w, r)
	})
}

// ServeHTTP implements http.Handler.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.mux.ServeHTTP(w, r) }

// Close ends every event stream (after a "closing" event) and the history
// sampler, and waits for the sampler; later streams get 503. It is
// idempotent and suits http.Server.RegisterOnShutdown.
func (d *Dashboard) Close() {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.closing)
	}
	d.mu.Unlock()
	d.sampler.Wait()
}

func (d *Dashboard) servePage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache") // a restarted process may serve another page
	h.Set("Content-Security-Policy", d.csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodHead {
		_, _ = w.Write(d.page)
	}
}

// contentSecurityPolicy allows only the page's own inline script and style
// (by hash) and requests to its own origin.
func contentSecurityPolicy(page []byte) string {
	return strings.Join([]string{"default-src 'none'", "script-src " + inlineHash(page, "script"),
		"style-src " + inlineHash(page, "style"), "connect-src 'self'", "img-src data:",
		"base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"}, "; ")
}

// inlineHash is the CSP source of the page's one inline <tag> element.
func inlineHash(page []byte, tag string) string {
	_, rest, _ := bytes.Cut(page, []byte("<"+tag+">"))
	body, _, ok := bytes.Cut(rest, []byte("</"+tag+">"))
	if !ok {
		return "'none'"
	}
	sum := sha256.Sum256(body)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	handlers.WriteError(w, status, code, msg)
}
