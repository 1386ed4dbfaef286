package handlers

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/orderagg/orderagg/internal/admission"
	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// logCapture is a slog.Handler that keeps every record.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCapture) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logCapture) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCapture) WithGroup(string) slog.Handler      { return l }

// records returns the records logged at level or above, each as its message
// and attributes.
func (l *logCapture) records(level slog.Level) []map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]string
	for _, r := range l.recs {
		if r.Level < level {
			continue
		}
		m := map[string]string{"msg": r.Message}
		r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
		out = append(out, m)
	}
	return out
}

// panicky is a middleware that panics; its name shows in the logged stack.
func panicky(echo.HandlerFunc) echo.HandlerFunc {
	return func(echo.Context) error { panic("panicky middleware") }
}

func panickyPager(context.Context, string) (*orderdetail.Page, error) { panic("panicky pager") }

// A panic in the middlewares (where telemetry sits) or in the handler is a
// JSON 500 INTERNAL with an X-Request-Id, logged once at ERROR with its
// stack, and the process lives on.
func TestPanicAnywhereIsALoggedJSON500(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  func(*Options)
		frame string // a function the logged stack must show
	}{
		{"telemetry's place", func(o *Options) { o.Middleware = []echo.MiddlewareFunc{panicky} }, "handlers.panicky"},
		{"handler", func(o *Options) { o.Pager = pagerFunc(panickyPager) }, "handlers.panickyPager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &logCapture{}
			o := Options{Pager: pagerFunc(okPage), Deadline: time.Second, Limiter: admission.New(10), Logger: slog.New(logs)}
			tc.opts(&o)
			h := New(o)
			for _, callerID := range []string{"", "caller-id-1"} {
				req := httptest.NewRequest(http.MethodGet, "/v1/orders/o-1", nil)
				if callerID != "" {
					req.Header.Set(echo.HeaderXRequestID, callerID)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusInternalServerError || errCode(t, w) != CodeInternal {
					t.Fatalf("status %d body %s, want 500 INTERNAL", w.Code, w.Body)
				}
				if ct := w.Header().Get(echo.HeaderContentType); !strings.HasPrefix(ct, "application/json") {
					t.Errorf("Content-Type %q", ct)
				}
				id := w.Header().Get(echo.HeaderXRequestID)
				if id == "" || (callerID != "" && id != callerID) {
					t.Errorf("X-Request-Id %q, caller sent %q", id, callerID)
				}
			}
			errs := logs.records(slog.LevelError)
			if len(errs) != 2 {
				t.Fatalf("%d ERROR records for 2 panics, want one each: %v", len(errs), errs)
			}
			for _, r := range errs {
				if r["msg"] != "panic serving a request" || !strings.Contains(r["panic"], "panicky") ||
					!strings.Contains(r["stack"], tc.frame) || r["path"] != "/v1/orders/o-1" {
					t.Errorf("logged %v; want the panic with a stack through %s", r, tc.frame)
				}
			}
		})
	}
}

// A handler's panic reaches the middlewares above it as an error, so the
// server span records the 500 rather than a request that vanished.
func TestHandlerPanicIsSeenByTheMiddleware(t *testing.T) {
	var seen error
	observe := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			seen = next(c)
			return seen
		}
	}
	h := New(Options{Pager: pagerFunc(panickyPager), Deadline: time.Second, Limiter: admission.New(10),
		Logger: slog.New(slog.DiscardHandler), Middleware: []echo.MiddlewareFunc{observe}})
	w := serve(t, h, context.Background(), "/v1/orders/o-1")
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d", w.Code)
	}
	if seen != errPanicked {
		t.Fatalf("middleware saw %v, want the recovered panic", seen)
	}
}

func TestRequestIDs(t *testing.T) {
	h := New(Options{Pager: pagerFunc(okPage), Deadline: time.Second, Limiter: admission.New(10), Logger: slog.New(slog.DiscardHandler)})
	ids := map[string]bool{}
	for _, tc := range []struct {
		sent string
		keep bool
	}{
		{"", false},
		{"abc-123", true},
		{strings.Repeat("x", 128), true},
		{strings.Repeat("x", 129), false},
		{"has space", false},
		{"ctl\x01", false},
	} {
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		if tc.sent != "" {
			req.Header.Set(echo.HeaderXRequestID, tc.sent)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		got := w.Header().Get(echo.HeaderXRequestID)
		switch {
		case tc.keep && got != tc.sent:
			t.Errorf("sent %q, answer carries %q; want the caller's", tc.sent, got)
		case !tc.keep && (len(got) != 26 || strings.Trim(got, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != ""):
			t.Errorf("sent %q, answer carries %q; want a fresh 26-letter base32 id", tc.sent, got)
		case !tc.keep:
			if ids[got] {
				t.Errorf("id %q made twice", got)
			}
			ids[got] = true
		}
	}
	// Answers that never reach a handler carry one too.
	if w := serve(t, h, context.Background(), "/nope"); w.Header().Get(echo.HeaderXRequestID) == "" || w.Code != http.StatusNotFound {
		t.Errorf("404: status %d, X-Request-Id %q", w.Code, w.Header().Get(echo.HeaderXRequestID))
	}
}

// HEAD is answered wherever GET is: the same status and headers, no body.
func TestHEADOnEveryGETRoute(t *testing.T) {
	dash := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "m 1\n") })
	e := New(Options{Pager: pagerFunc(okPage), Deadline: time.Second, Limiter: admission.New(10), Logger: slog.New(slog.DiscardHandler),
		Report: func() ResilienceReport { return ResilienceReport{} }, Metrics: metrics, Dashboard: dash, Ready: func() bool { return true }})

	routes := map[string][]string{}
	for _, r := range e.Routes() {
		routes[r.Path] = append(routes[r.Path], r.Method)
	}
	var gets int
	for path, methods := range routes {
		if slices.Contains(methods, http.MethodGet) {
			gets++
			if !slices.Contains(methods, http.MethodHead) {
				t.Errorf("%s: GET without HEAD (%v)", path, methods)
			}
		}
	}
	if gets < 5 {
		t.Fatalf("only %d GET routes found: %v", gets, routes)
	}

	srv := httptest.NewServer(e)
	defer srv.Close()
	for _, path := range []string{"/healthz", "/readyz", "/v1/orders/o-1", "/v1/resilience", "/metrics", "/dashboard"} {
		get := fetch(t, srv, http.MethodGet, path)
		head := fetch(t, srv, http.MethodHead, path)
		if head.code != get.code || head.code != http.StatusOK || len(head.body) != 0 ||
			head.header.Get(echo.HeaderContentType) != get.header.Get(echo.HeaderContentType) || head.header.Get(echo.HeaderXRequestID) == "" {
			t.Errorf("HEAD %s: %d %q %v; GET: %d %v", path, head.code, head.body, head.header, get.code, get.header)
		}
	}
	// The 405 for other methods names HEAD among those allowed.
	w := fetch(t, srv, http.MethodDelete, "/healthz")
	if w.code != http.StatusMethodNotAllowed || !strings.Contains(w.header.Get("Allow"), http.MethodHead) {
		t.Errorf("DELETE /healthz: %d, Allow %q", w.code, w.header.Get("Allow"))
	}
}

type fetched struct {
	code   int
	header http.Header
	body   []byte
}

func fetch(t *testing.T, srv *httptest.Server, method, path string) fetched {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fetched{resp.StatusCode, resp.Header, body}
}

// fakeControl is a Control with one dependency, "coupon".
type fakeControl struct{ patched []byte }

func (f *fakeControl) Settings() map[string]map[string]any {
	return map[string]map[string]any{"coupon": {"timeout": "300ms"}}
}

func (f *fakeControl) Patch(dep string, body []byte) (map[string]any, error) {
	if dep != "coupon" {
		return nil, config.ErrUnknownDependency
	}
	f.patched = body
	return map[string]any{"timeout": "250ms"}, nil
}

func (f *fakeControl) ForceBreaker(dep string, _ resilience.Force) error {
	if dep != "coupon" {
		return config.ErrUnknownDependency
	}
	return nil
}

func adminDo(t *testing.T, h http.Handler, method, path, auth string, body io.Reader) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, body)
	if auth != "" {
		req.Header.Set(echo.HeaderAuthorization, auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

const testToken = "0123456789abcdef-admin"

// Only the exact token opens the admin API: not a prefix of it, not a
// longer one, not another scheme.
func TestAdminToken(t *testing.T) {
	h := NewAdmin(&fakeControl{}, testToken, nil, slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"Bearer " + testToken, http.StatusOK},
		{"bearer " + testToken, http.StatusOK}, // the scheme is case-insensitive (RFC 9110)
		{"", http.StatusUnauthorized},
		{"Bearer x", http.StatusUnauthorized},
		{"Bearer " + testToken[:len(testToken)-1], http.StatusUnauthorized},
		{"Bearer " + testToken + "x", http.StatusUnauthorized},
		{"Bearer " + strings.Repeat("a", 4096), http.StatusUnauthorized},
		{"Basic " + testToken, http.StatusUnauthorized},
		{testToken, http.StatusUnauthorized},
	} {
		w := adminDo(t, h, http.MethodGet, "/admin/dependencies", tc.auth, nil)
		if w.Code != tc.want {
			t.Errorf("Authorization %.30q: status %d, want %d", tc.auth, w.Code, tc.want)
			continue
		}
		if tc.want == http.StatusUnauthorized {
			if code := errCode(t, w); code != CodeUnauthorized || w.Header().Get(echo.HeaderWWWAuthenticate) == "" {
				t.Errorf("Authorization %.30q: code %s, WWW-Authenticate %q", tc.auth, code, w.Header().Get(echo.HeaderWWWAuthenticate))
			}
		}
	}
	// An empty token (config refuses it; this is the last line of defence)
	// opens nothing.
	if w := adminDo(t, NewAdmin(&fakeControl{}, "", nil, slog.New(slog.DiscardHandler)), http.MethodGet, "/admin/dependencies", "Bearer ", nil); w.Code != http.StatusUnauthorized {
		t.Errorf("empty token: status %d", w.Code)
	}
}

// Admin bodies over 64 KiB are refused with 413 whether the client says
// so up front (Content-Length) or not (chunked), and never reach Control.
func TestAdminBodyLimit(t *testing.T) {
	ctl := &fakeControl{}
	h := NewAdmin(ctl, testToken, nil, slog.New(slog.DiscardHandler))
	big := `{"timeout":"` + strings.Repeat("9", 64<<10) + `"}`
	for _, tc := range []struct {
		name string
		body io.Reader
	}{
		{"content-length", strings.NewReader(big)},
		{"chunked", io.MultiReader(strings.NewReader(big))}, // unknown length
	} {
		w := adminDo(t, h, http.MethodPatch, "/admin/dependencies/coupon", "Bearer "+testToken, tc.body)
		if w.Code != http.StatusRequestEntityTooLarge || errCode(t, w) != CodeTooLarge {
			t.Errorf("%s: status %d %s, want 413 %s", tc.name, w.Code, w.Body, CodeTooLarge)
		}
	}
	if ctl.patched != nil {
		t.Fatal("an oversized body reached Control")
	}
	w := adminDo(t, h, http.MethodPatch, "/admin/dependencies/coupon", "Bearer "+testToken, strings.NewReader(`{"timeout":"250ms"}`))
	if w.Code != http.StatusOK || string(ctl.patched) != `{"timeout":"250ms"}` {
		t.Fatalf("a small body: status %d %s, Control got %q", w.Code, w.Body, ctl.patched)
	}
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got["name"] != "coupon" {
		t.Fatalf("answer %s (%v)", w.Body, err)
	}
}
