// Package handlers is orderagg's HTTP edge: the public API's and the admin
// API's routes, and ErrorHandler, the one place where errors become
// statuses. A handler decodes, calls, and encodes.
package handlers

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/orderagg/orderagg/internal/admission"
	"github.com/orderagg/orderagg/internal/hostguard"
)

// MaxURLBytes is the longest request URI served; longer ones get 414.
const MaxURLBytes = 8 << 10

// Options wires the public API. Pager and Deadline are required; every
// other zero field leaves its part out, as documented.
type Options struct {
	Pager Pager
	// Deadline bounds each order-detail request, from its arrival.
	Deadline time.Duration
	// Limiter admits order-detail requests; nil means
	// admission.New(MaxInflight). A refused request gets an immediate 503
	// OVERLOADED with Retry-After.
	Limiter     *admission.Limiter
	MaxInflight int
	// Report builds the /v1/resilience document; nil: no such route.
	Report func() ResilienceReport
	// Metrics serves /metrics, Dashboard /dashboard and below; nil: no
	// such routes.
	Metrics, Dashboard http.Handler
	// Ready reports readiness for /readyz; nil: always ready.
	Ready func() bool
	// Guard checks Host and Origin (internal/hostguard); nil serves all.
	Guard  *hostguard.Guard
	Logger *slog.Logger
	// Record hears every order-detail outcome, Rejected every request
	// refused at admission (telemetry); either may be nil.
	Record   func(ctx context.Context, status int, degraded bool, d time.Duration)
	Rejected func(ctx context.Context)
	// Middleware runs after the request id and the host check, around the
	// handlers (telemetry's server span).
	Middleware []echo.MiddlewareFunc
}

// New builds the public API's router. Middleware, outermost first:
// recovery, request id, host check, URL length, o.Middleware, recovery
// again. The outer recovery turns a panic in a middleware into a logged
// JSON 500; the inner one turns a handler's panic into an error that
// o.Middleware sees, so the server span records the 500 too.
func New(o Options) *echo.Echo {
	e := newEcho(o.Logger, o.Guard)
	e.Use(limitURL)
	e.Use(o.Middleware...)
	e.Use(recovery(o.Logger, true))

	h := &orders{pager: o.Pager, deadline: o.Deadline, limiter: o.Limiter, record: o.Record, rejected: o.Rejected}
	if h.limiter == nil {
		h.limiter = admission.New(o.MaxInflight)
	}
	if h.record == nil {
		h.record = func(context.Context, int, bool, time.Duration) {}
	}
	if h.rejected == nil {
		h.rejected = func(context.Context) {}
	}
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

// newEcho is a router with the middleware every listener has: recovery,
// request id and, when g is set, the host check.
func newEcho(logger *slog.Logger, g *hostguard.Guard) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = ErrorHandler(logger)
	e.Use(recovery(logger, false), requestID())
	if g != nil {
		e.Use(echo.WrapMiddleware(g.Wrap))
	}
	return e
}

// get routes GET and HEAD to h: the contract answers HEAD wherever it
// answers GET, and net/http drops the body of a HEAD answer by itself.
func get(e *echo.Echo, path string, h echo.HandlerFunc) {
	e.Match([]string{http.MethodGet, http.MethodHead}, path, h)
}

// requestID keeps the caller's X-Request-Id when it is a sane token (1–128
// printable ASCII bytes) and makes one otherwise, so every answer and log
// line can be tied together.
func requestID() echo.MiddlewareFunc {
	return middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator: rand.Text,
		RequestIDHandler: func(c echo.Context, id string) {
			if !saneRequestID(id) {
				c.Response().Header().Set(echo.HeaderXRequestID, rand.Text())
			}
		},
	})
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := range len(id) {
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

// recovery turns a panic below it into a 500, logged at ERROR with the
// panicking goroutine's stack, so one bad request cannot take the process
// down. passUp returns the error to the middleware above instead of
// answering at once.
func recovery(logger *slog.Logger, passUp bool) echo.MiddlewareFunc {
	return middleware.RecoverWithConfig(middleware.RecoverConfig{
		StackSize:           16 << 10,
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
