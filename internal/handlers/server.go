// Package handlers is orderagg's HTTP edge: the public and admin APIs'
// routes and the Host and Origin checks of every listener. Every status
// >= 400 they write is the contract's JSON error document.
package handlers

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/orderagg/orderagg/internal/admission"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Options wires the public API. Ready, Guard, Record, Rejected and
// Middleware may be left zero; every other field is required.
type Options struct {
	Pager     Pager
	Deadline  time.Duration      // bounds each order-detail request, from its arrival
	Limiter   *admission.Limiter // a request it refuses gets 503 OVERLOADED with Retry-After
	Report    func() ResilienceReport
	Metrics   http.Handler // GET /metrics
	Dashboard http.Handler // /dashboard and below
	Ready     func() bool  // readiness for /readyz; nil: always ready
	Guard     *HostGuard   // checks Host and Origin; nil: serves all
	Logger    *slog.Logger
	// Record hears every order-detail outcome, Rejected every request
	// refused at admission.
	Record   func(ctx context.Context, status int, degraded bool, d time.Duration)
	Rejected func(ctx context.Context)
	// Middleware runs inside the request id, host check and URL bound,
	// around the handlers (telemetry's server span).
	Middleware []echo.MiddlewareFunc
}

// New builds the public API's router. A panic in a middleware is a logged
// JSON 500; a handler's panic reaches o.Middleware as an error first.
func New(o Options) *echo.Echo {
	e := newEcho(o.Logger, o.Guard)
	e.Use(o.Middleware...)
	e.Use(recovery(o.Logger, true))
	get(e, "/v1/orders/:id", (&orders{o}).get)
	get(e, "/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	get(e, "/readyz", func(c echo.Context) error {
		if o.Ready != nil && !o.Ready() {
			return &APIError{http.StatusServiceUnavailable, CodeNotReady, "starting or draining; not taking traffic", 1}
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
	get(e, "/v1/resilience", func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		return c.JSON(http.StatusOK, o.Report())
	})
	get(e, "/metrics", echo.WrapHandler(o.Metrics))
	e.Any("/dashboard", echo.WrapHandler(o.Dashboard))
	e.Any("/dashboard/*", echo.WrapHandler(o.Dashboard))
	return e
}

// saneRequestID matches a caller's X-Request-Id that is kept.
var saneRequestID = regexp.MustCompile(`^[!-~]{1,128}$`)

// newEcho is a router with what every listener has: the JSON errors,
// recovery, the request id, the host check when g is set, and a 414 for a
// request URI over 8 KiB.
func newEcho(logger *slog.Logger, g *HostGuard) *echo.Echo {
	e := echo.New()
	e.HTTPErrorHandler = errorHandler(logger)
	e.Use(recovery(logger, false), middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator: rand.Text,
		RequestIDHandler: func(c echo.Context, id string) {
			if !saneRequestID.MatchString(id) {
				c.Response().Header().Set(echo.HeaderXRequestID, rand.Text())
			}
		},
	}))
	if g != nil {
		e.Use(echo.WrapMiddleware(g.Wrap))
	}
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if len(c.Request().RequestURI) > 8<<10 {
				return &APIError{http.StatusRequestURITooLong, CodeURITooLong, "request URI longer than 8 KiB", 0}
			}
			return next(c)
		}
	})
	return e
}

// get routes GET and HEAD to h: net/http drops the body of a HEAD answer.
func get(e *echo.Echo, path string, h echo.HandlerFunc) {
	e.Match([]string{http.MethodGet, http.MethodHead}, path, h)
}

// errPanicked answers a recovered panic, and an error of no known kind.
var errPanicked = &APIError{http.StatusInternalServerError, CodeInternal, "internal error", 0}

// recovery turns a panic below it into errPanicked, logged at ERROR with the
// panicking goroutine's stack. passUp returns it to the middleware above
// instead of answering at once.
func recovery(logger *slog.Logger, passUp bool) echo.MiddlewareFunc {
	return middleware.RecoverWithConfig(middleware.RecoverConfig{
		StackSize: 16 << 10, DisableStackAll: true, DisableErrorHandler: passUp,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			req := c.Request()
			logger.ErrorContext(req.Context(), "panic serving a request", "panic", err.Error(), "method", req.Method,
				"path", req.URL.Path, "request_id", c.Response().Header().Get(echo.HeaderXRequestID), "stack", string(stack))
			return errPanicked
		},
	})
}

// Error codes of the contract's JSON errors.
const (
	CodeInvalidOrderID   = "INVALID_ORDER_ID"
	CodeOrderNotFound    = "ORDER_NOT_FOUND"
	CodeOrderUnavailable = "ORDER_UNAVAILABLE"
	CodeOverloaded       = "OVERLOADED"
	CodeNotReady         = "NOT_READY"
	CodeTooLarge         = "PAYLOAD_TOO_LARGE"
	CodeNotFound         = "NOT_FOUND"
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED"
	CodeURITooLong       = "URI_TOO_LONG"
	CodeBadRequest       = "BAD_REQUEST"
	CodeUnauthorized     = "UNAUTHORIZED"
	CodeInternal         = "INTERNAL"
)

// APIError is an error a handler answers with: a status, the contract's
// code, a message safe to show, and a Retry-After in seconds when above 0.
type APIError struct {
	Status     int    `json:"-"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	RetryAfter int    `json:"-"`
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// ErrorBody is the contract's error document, {"error":{"code":…,"message":…}}.
type ErrorBody struct {
	Error APIError `json:"error"`
}

// WriteError writes the contract's JSON error, for net/http handlers.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ErrorBody{APIError{Code: code, Message: msg}})
}

// echoCodes are the contract's codes of the errors echo answers with; any
// other is BAD_REQUEST below 500 and INTERNAL from 500.
var echoCodes = map[int]string{
	http.StatusNotFound: CodeNotFound, http.StatusMethodNotAllowed: CodeMethodNotAllowed, http.StatusRequestEntityTooLarge: CodeTooLarge,
}

// errorHandler renders an *APIError as it says, an *echo.HTTPError with its
// status, and anything else as a logged, bare 500, so internals never leak.
func errorHandler(logger *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		apiErr := errPanicked
		var he *echo.HTTPError
		switch {
		case c.Response().Committed:
			return
		case errors.As(err, &apiErr):
		case errors.As(err, &he):
			apiErr = &APIError{he.Code, cmp.Or(echoCodes[he.Code], CodeBadRequest), http.StatusText(he.Code), 0}
			if he.Code >= 500 {
				apiErr.Code = CodeInternal
			}
		default:
			logger.ErrorContext(c.Request().Context(), "unhandled error", "err", err, "path", c.Path())
		}
		if apiErr.RetryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(apiErr.RetryAfter))
		}
		_ = c.JSON(apiErr.Status, ErrorBody{*apiErr})
	}
}

// ResilienceReport is the /v1/resilience document, which the dashboard
// streams too: each guard's Snapshot, in the order given.
type ResilienceReport struct {
	GeneratedAt  time.Time             `json:"generated_at"`
	DeadlineMS   int64                 `json:"deadline_ms"`
	Dependencies []resilience.Snapshot `json:"dependencies"`
}

// NewResilienceReport reads the guards; deadline is a request's budget.
func NewResilienceReport(now time.Time, deadline time.Duration, guards []*resilience.Guard) ResilienceReport {
	r := ResilienceReport{GeneratedAt: now.UTC(), DeadlineMS: deadline.Milliseconds(), Dependencies: []resilience.Snapshot{}}
	for _, g := range guards {
		r.Dependencies = append(r.Dependencies, g.Snapshot())
	}
	return r
}
