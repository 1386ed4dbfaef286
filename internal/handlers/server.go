// Package handlers is orderagg's HTTP edge: routes, the one error renderer,
// request ids, admission control and the admin API. Handlers stay thin:
// validate, call, encode.
package handlers

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/orderagg/orderagg/internal/admission"
	"github.com/orderagg/orderagg/internal/status"
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
	Report func() status.Report
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
}

// New builds the public API's router.
func New(o Options) *echo.Echo {
	e := newEcho(o.Logger)
	e.Use(requestID, limitURL)
	e.Use(o.Middleware...)
	e.Use(recoverPanics(o.Logger))

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
	e.GET("/v1/orders/:id", h.get)
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", func(c echo.Context) error {
		if o.Ready != nil && !o.Ready() {
			return &APIError{Status: http.StatusServiceUnavailable, Code: CodeNotReady, Message: "starting or draining; not taking traffic", RetryAfter: 1}
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
	if o.Report != nil {
		e.GET("/v1/resilience", func(c echo.Context) error {
			c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
			return c.JSON(http.StatusOK, o.Report())
		})
	}
	if o.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(o.Metrics))
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

// requestID keeps the caller's X-Request-Id when it is a sane token, and
// makes one otherwise, so every answer and log line can be tied together.
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !saneRequestID(id) {
			id = newRequestID()
		}
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		return next(c)
	}
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

// recoverPanics turns a handler's panic into a logged 500, so one bad
// request cannot take the process down.
func recoverPanics(logger *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			defer func() {
				r := recover()
				if r == nil {
					return
				}
				if r == http.ErrAbortHandler {
					panic(r) // net/http's way to abort a response; let it
				}
				logger.ErrorContext(c.Request().Context(), "panic in handler",
					"panic", fmt.Sprint(r), "path", c.Path(), "stack", string(debug.Stack()))
				err = &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
			}()
			return next(c)
		}
	}
}
