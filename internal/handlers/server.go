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
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/orderagg/orderagg/internal/admission"
)

// Options wires the public API. Pager, Deadline and Limiter are required;
// any other field left zero leaves its part out.
type Options struct {
	Pager Pager
	// Deadline bounds each order-detail request, from its arrival.
	Deadline time.Duration
	// Limiter admits order-detail requests; one refused gets an immediate
	// 503 OVERLOADED with Retry-After.
	Limiter *admission.Limiter
	// Report builds the /v1/resilience document; Metrics serves /metrics,
	// Dashboard /dashboard and below.
	Report             func() ResilienceReport
	Metrics, Dashboard http.Handler
	Ready              func() bool // readiness for /readyz; nil: always ready
	Guard              *HostGuard  // checks Host and Origin; nil: serves all
	Logger             *slog.Logger
	// Record hears every order-detail outcome, Rejected every request
	// refused at admission.
	Record   func(ctx context.Context, status int, degraded bool, d time.Duration)
	Rejected func(ctx context.Context)
	// Middleware runs inside the request id and the host check, around the
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
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if len(c.Request().RequestURI) > 8<<10 {
				return &APIError{http.StatusRequestURITooLong, CodeURITooLong, "request URI longer than 8 KiB", 0}
			}
			return next(c)
		}
	})
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
		e.Any("/dashboard", echo.WrapHandler(o.Dashboard))
		e.Any("/dashboard/*", echo.WrapHandler(o.Dashboard))
	}
	return e
}

// newEcho is a router with what every listener has: the JSON error
// handler, recovery, the request id and, when g is set, the host check.
// The request id is the caller's X-Request-Id when it is 1–128 printable
// ASCII bytes, else a new one.
func newEcho(logger *slog.Logger, g *HostGuard) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(logger)
	e.Use(recovery(logger, false), middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator: rand.Text,
		RequestIDHandler: func(c echo.Context, id string) {
			sane := id != "" && len(id) <= 128
			for i := 0; sane && i < len(id); i++ {
				sane = id[i] > 0x20 && id[i] < 0x7f
			}
			if !sane {
				c.Response().Header().Set(echo.HeaderXRequestID, rand.Text())
			}
		},
	}))
	if g != nil {
		e.Use(echo.WrapMiddleware(g.Wrap))
	}
	return e
}

// get routes GET and HEAD to h: net/http drops the body of a HEAD answer.
func get(e *echo.Echo, path string, h echo.HandlerFunc) {
	e.Match([]string{http.MethodGet, http.MethodHead}, path, h)
}

// errPanicked is the answer to a recovered panic, logged where it is
// recovered (with the stack), so errorHandler does not log it again.
var errPanicked = &APIError{http.StatusInternalServerError, CodeInternal, "internal error", 0}

// recovery turns a panic below it into a 500, logged at ERROR with the
// panicking goroutine's stack. passUp returns the error to the middleware
// above instead of answering at once.
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

// WriteError answers with status and the contract's JSON error, for plain
// net/http handlers.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ErrorBody{APIError{Code: code, Message: msg}})
}

// echoCodes names the errors echo and its middleware answer with in the
// contract's codes; any other is BAD_REQUEST below 500, INTERNAL above.
var echoCodes = map[int]string{
	http.StatusNotFound:              CodeNotFound,
	http.StatusMethodNotAllowed:      CodeMethodNotAllowed,
	http.StatusRequestEntityTooLarge: CodeTooLarge,
}

// errorHandler renders every error as the contract's JSON: an *APIError as
// it says, echo's own errors with their status, and anything else as a
// logged, bare 500, so internals never leak.
func errorHandler(logger *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		apiErr := errPanicked // the bare 500, for an error of no known kind
		var he *echo.HTTPError
		switch {
		case errors.As(err, &apiErr):
		case errors.As(err, &he):
			code := cmp.Or(echoCodes[he.Code], CodeBadRequest)
			if he.Code >= 500 && code == CodeBadRequest {
				code = CodeInternal
			}
			apiErr = &APIError{he.Code, code, http.StatusText(he.Code), 0}
		default:
			logger.ErrorContext(c.Request().Context(), "unhandled error", "err", err, "path", c.Path())
		}
		if apiErr.RetryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(apiErr.RetryAfter))
		}
		if err := c.JSON(apiErr.Status, ErrorBody{*apiErr}); err != nil {
			logger.DebugContext(c.Request().Context(), "writing error response", "err", err)
		}
	}
}
