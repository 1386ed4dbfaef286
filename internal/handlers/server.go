// Package handlers is orderagg's HTTP edge: routes, the one error renderer,
// request ids, admission control and the admin API. Handlers stay thin:
// validate, call, encode.
package handlers

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/orderagg/orderagg/internal/admission"
)

// MaxURLBytes is the longest request URI served; longer ones get 414.
const MaxURLBytes = 8 << 10

// Options wires the public API.
type Options struct {
	Pager    Pager
	Deadline time.Duration
	// MaxInflight bounds the order-detail requests served at once when
	// Limiter is nil (admission.Fixed(MaxInflight)).
	MaxInflight int
	// Limiter admits order-detail requests; nil means
	// admission.Fixed(MaxInflight), today's fixed cap. A refused request
	// gets the immediate 503 OVERLOADED with Retry-After either way.
	Limiter admission.Limiter
	// Report builds the /v1/resilience document.
	Report func() ResilienceReport
	// Metrics serves /metrics; Dashboard serves /dashboard and below.
	Metrics   http.Handler
	Dashboard http.Handler
	// Ready reports readiness for /readyz (false while starting or draining).
	Ready  func() bool
	Logger *slog.Logger
	// Record hears every order-detail outcome (telemetry); may be nil.
	Record func(ctx context.Context, status int, degraded bool, d time.Duration)
	// Rejected hears every request refused at admission; may be nil.
	Rejected func(ctx context.Context)
	// Middleware runs after request ids are set (telemetry's server spans).
	Middleware []echo.MiddlewareFunc

	// outer runs just inside the outer recovery, before request ids, and
	// inner just before the handlers (tests put panicking middleware
	// there).
	outer, inner []echo.MiddlewareFunc
}

// New builds the public API's router. Middleware, outermost first:
// recovery, request id, URL length, o.Middleware, recovery again. The outer
// recovery is the safety net: a panic anywhere, in a middleware included,
// becomes a logged JSON 500. The inner one turns a handler's panic into an
// error before it passes o.Middleware, so the server span and its status
// see the 500 too.
func New(o Options) *echo.Echo {
	e := newEcho(o.Logger)
	e.Use(recovery(o.Logger, false))
	e.Use(o.outer...)
	e.Use(requestID(), limitURL)
	e.Use(o.Middleware...)
	e.Use(recovery(o.Logger, true))
	e.Use(o.inner...)

	record := o.Record
	if record == nil {
		record = func(context.Context, int, bool, time.Duration) {}
	}
	limiter := o.Limiter
	if limiter == nil {
		limiter = admission.Fixed(o.MaxInflight)
	}
	rejected := o.Rejected
	if rejected == nil {
		rejected = func(context.Context) {}
	}
	h := &orders{pager: o.Pager, deadline: o.Deadline, limiter: limiter, record: record, rejected: rejected}
	get(e, "/v1/orders/:id", h.get)
	get(e, "/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	get(e, "/readyz", func(c echo.Context) error {
		if o.Ready != nil && !o.Ready() {
			return &APIError{Status: http.StatusServiceUnavailable, Code: CodeNotReady, Message: "starting or draining; not taking traffic", RetryAfter: 1}
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
	if o.Report != nil {
		get(e, "/v1/resilience", func(c echo.Context) error {
			c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
			return c.JSON(http.StatusOK, o.Report())
		})
	}
	if o.Metrics != nil {
		get(e, "/metrics", echo.WrapHandler(o.Metrics))
	}
	if o.Dashboard != nil {
		d := echo.WrapHandler(o.Dashboard)
		e.Any("/dashboard", d)
		e.Any("/dashboard/*", d)
	}
	return e
}

func newEcho(logger *slog.Logger) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = ErrorHandler(logger)
	return e
}

// get routes GET and HEAD to h: the contract answers HEAD wherever it
// answers GET, and net/http drops the body of a HEAD answer by itself.
func get(e *echo.Echo, path string, h echo.HandlerFunc) {
	e.Match(getHead, path, h)
}

var getHead = []string{http.MethodGet, http.MethodHead}

// requestID keeps the caller's X-Request-Id when it is a sane token, and
// makes one otherwise, so every answer and log line can be tied together.
func requestID() echo.MiddlewareFunc {
	return middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator: newRequestID,
		// echo keeps any non-empty id; an absurd one (control bytes,
		// kilobytes long) is replaced rather than echoed into our answers
		// and logs.
		RequestIDHandler: func(c echo.Context, id string) {
			if !saneRequestID(id) {
				c.Response().Header().Set(echo.HeaderXRequestID, newRequestID())
			}
		},
	})
}

// ensureRequestID gives an answer that left the chain before requestID ran
// (a panic in an outer middleware) its X-Request-Id after all.
func ensureRequestID(c echo.Context) {
	h := c.Response().Header()
	if h.Get(echo.HeaderXRequestID) != "" {
		return
	}
	id := c.Request().Header.Get(echo.HeaderXRequestID)
	if !saneRequestID(id) {
		id = newRequestID()
	}
	h.Set(echo.HeaderXRequestID, id)
}

// newRequestID returns 96 random bits in hex. Ids correlate log lines and
// need to be unique, not secret, so the runtime's per-thread ChaCha8 source
// (math/rand/v2) does: no system call and no lock per request.
func newRequestID() string {
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
	return hex.EncodeToString(b[:])
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

func limitURL(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if len(c.Request().RequestURI) > MaxURLBytes {
			return &APIError{Status: http.StatusRequestURITooLong, Code: CodeURITooLong, Message: "request URI longer than 8 KiB"}
		}
		return next(c)
	}
}

// errPanicked is the answer to a recovered panic. It is logged, with the
// stack, where it is recovered, so the error handler does not log it again.
var errPanicked = &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}

// recoveryStackBytes bounds the stack logged with a panic: the panicking
// goroutine's frames, not every goroutine's.
const recoveryStackBytes = 16 << 10

// recovery turns a panic below it into a logged 500 (ERROR, with the stack),
// so one bad request cannot take the process down. passUp returns the error
// to the middleware above instead of answering at once.
func recovery(logger *slog.Logger, passUp bool) echo.MiddlewareFunc {
	return middleware.RecoverWithConfig(middleware.RecoverConfig{
		StackSize:           recoveryStackBytes,
		DisableStackAll:     true,
		DisableErrorHandler: passUp,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			req := c.Request()
			logger.ErrorContext(req.Context(), "panic serving a request",
				"panic", err.Error(), "method", req.Method, "path", req.URL.Path,
				"request_id", c.Response().Header().Get(echo.HeaderXRequestID), "stack", string(stack))
			return errPanicked
		},
	})
}
