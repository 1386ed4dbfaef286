package dashboard

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
)

// DefaultInterval is how often a stream sends a report when Options.Interval
// is not set: the contract asks for at least one update a second.
const DefaultInterval = time.Second

// DefaultMaxStreams bounds the event streams open at once when
// Options.MaxStreams is not set. Each holds a goroutine and a connection for
// as long as a tab stays open, and streams bypass the order-detail
// admission limit, so without a bound a client could open thousands.
const DefaultMaxStreams = 100

// Options configures a Dashboard. Only Report is required.
type Options struct {
	// Report builds the /v1/resilience document; it is called once per
	// stream per Interval, so it must be cheap and safe for concurrent use.
	Report func() handlers.ResilienceReport
	// Faults turns on demo mode: fault controls on the page and the
	// /dashboard/faults routes. nil (the default) means neither exists.
	Faults FaultController
	// Interval between two reports on a stream; default DefaultInterval.
	Interval time.Duration
	// Logger receives fault changes (Info) and stream starts and ends
	// (Debug); default discards everything.
	Logger *slog.Logger
	// Title is the service name shown in the page's header; default
	// "orderagg".
	Title string
	// MaxStreams bounds the event streams open at once; beyond it a stream
	// is refused with 503 TOO_MANY_STREAMS and Retry-After. Default
	// DefaultMaxStreams.
	MaxStreams int

	// newTicker replaces time.NewTicker in tests, so that a test decides
	// when a stream's next report is due instead of sleeping.
	newTicker func(time.Duration) (<-chan time.Time, func())
	// streamEnded, if set, is called as each stream's handler returns, so
	// a test can wait for a slot to free instead of sleeping.
	streamEnded func()
}

// Dashboard serves the page, its event stream and, in demo mode, the fault
// controls. Build it with New; it is safe for concurrent use.
type Dashboard struct {
	report   func() handlers.ResilienceReport
	faults   FaultController
	interval time.Duration
	log      *slog.Logger
	ticker   func(time.Duration) (<-chan time.Time, func())

	page []byte
	csp  string
	mux  *http.ServeMux

	maxStreams  int
	streamEnded func()

	// closing is closed by Close; streams counts the event streams (and
	// the history sampler) still running so that Close can wait for them;
	// open is the streams among them, held to maxStreams. mu orders
	// streams.Add against Close, as sync.WaitGroup requires.
	mu      sync.Mutex
	closed  bool
	started bool
	open    int
	closing chan struct{}
	streams sync.WaitGroup

	history history
}

//go:embed page.html
var pageHTML string

// pageTemplate is parsed once: the embedded file is part of the binary, so
// a parse error is a build defect that the package's tests catch.
var pageTemplate = template.Must(template.New("page").Parse(pageHTML))

// pageData is what the page template is rendered with, once, in New.
type pageData struct {
	Title      string
	Demo       bool
	IntervalMS int64
}

// New builds a dashboard. It panics when opts.Report is nil, as
// http.HandleFunc does for a nil handler: that is a wiring mistake, not a
// run-time condition.
func New(opts Options) *Dashboard {
	if opts.Report == nil {
		panic("dashboard: New needs Options.Report")
	}
	d := &Dashboard{
		report:   opts.Report,
		faults:   opts.Faults,
		interval: opts.Interval,
		log:      opts.Logger,
		ticker:   opts.newTicker,
		closing:  make(chan struct{}),
		mux:      http.NewServeMux(),

		maxStreams:  opts.MaxStreams,
		streamEnded: opts.streamEnded,
	}
	if d.interval <= 0 {
		d.interval = DefaultInterval
	}
	if d.maxStreams <= 0 {
		d.maxStreams = DefaultMaxStreams
	}
	if d.streamEnded == nil {
		d.streamEnded = func() {}
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.ticker == nil {
		d.ticker = func(every time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(every)
			return t.C, t.Stop
		}
	}
	title := opts.Title
	if title == "" {
		title = "orderagg"
	}
	var buf bytes.Buffer
	// The data are a string, a bool and an int: execution cannot fail on
	// them once the template has parsed.
	if err := pageTemplate.Execute(&buf, pageData{Title: title, Demo: d.faults != nil, IntervalMS: d.interval.Milliseconds()}); err != nil {
		panic(fmt.Sprintf("dashboard: rendering the page: %v", err))
	}
	d.page = buf.Bytes()
	d.csp = contentSecurityPolicy(d.page)

	d.mux.HandleFunc("/dashboard", d.servePage)
	d.mux.HandleFunc("/dashboard/{$}", func(w http.ResponseWriter, r *http.Request) {
		// The page resolves its URLs against /dashboard; one canonical
		// address keeps them right.
		http.Redirect(w, r, "/dashboard", http.StatusMovedPermanently)
	})
	d.mux.HandleFunc("/dashboard/events", d.serveEvents)
	d.mux.HandleFunc("/dashboard/faults", d.serveFaults)
	d.mux.HandleFunc("/dashboard/faults/{service}", d.serveFault)
	d.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, codeNotFound, "no such path: "+r.URL.Path)
	})
	return d
}

// ServeHTTP implements http.Handler.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.mux.ServeHTTP(w, r) }

// Close ends every open event stream and the history sampler, and waits
// until they have returned; streams requested afterwards are refused with
// 503. The page and the fault routes keep working. Close is idempotent and
// suits http.Server.RegisterOnShutdown.
func (d *Dashboard) Close() {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.closing)
	}
	d.mu.Unlock()
	d.streams.Wait()
}

func (d *Dashboard) servePage(w http.ResponseWriter, r *http.Request) {
	if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(d.page)))
	// no-cache, not no-store: the page is static per process, but a
	// restarted process may have changed demo mode or the interval.
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", d.csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(d.page)
	}
}

// contentSecurityPolicy allows exactly the page's own inline script and
// style (by hash) and requests to its own origin: the page needs nothing
// else, so an injected tag or a stray reference to the internet is refused
// by the browser instead of silently working on a developer's laptop.
func contentSecurityPolicy(page []byte) string {
	return strings.Join([]string{
		"default-src 'none'",
		"script-src " + inlineHash(page, "script"),
		"style-src " + inlineHash(page, "style"),
		"connect-src 'self'",
		"img-src data:",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}

// inlineHash is the CSP source of the page's one inline <tag> element.
func inlineHash(page []byte, tag string) string {
	_, rest, ok := bytes.Cut(page, []byte("<"+tag+">"))
	if !ok {
		return "'none'"
	}
	body, _, ok := bytes.Cut(rest, []byte("</"+tag+">"))
	if !ok {
		return "'none'"
	}
	sum := sha256.Sum256(body)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Error codes of the JSON errors, shared with the rest of the service's API.
const (
	codeNotFound         = "NOT_FOUND"
	codeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	codeUnavailable      = "UNAVAILABLE"
	codeTooManyStreams   = "TOO_MANY_STREAMS"
	codeUnknownService   = "UNKNOWN_SERVICE"
	codeInvalidFault     = "INVALID_FAULT"
	codeInternal         = "INTERNAL"
)

// allowMethods answers 405 with an Allow header unless r's method is one of
// methods, and reports whether the handler should go on.
func allowMethods(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, http.StatusMethodNotAllowed, codeMethodNotAllowed, r.Method+" is not allowed here")
	return false
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	handlers.WriteError(w, status, code, msg)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Cache-Control", "no-store")
	handlers.WriteJSON(w, status, v)
}
