package handlers

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
)

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
	Status     int
	Code       string
	Message    string
	RetryAfter int
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// ErrorBody is the contract's error document,
// {"error":{"code":…,"message":…}}.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// WriteError answers with status and the contract's JSON error, for the
// plain net/http handlers served beside the echo routes (the dashboard).
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	var b ErrorBody
	b.Error.Code, b.Error.Message = code, msg
	WriteJSON(w, status, b)
}

// WriteJSON answers with status and v as JSON; a value that cannot be
// encoded becomes a 500 error document instead, never half a body.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"`+CodeInternal+`","message":"encoding failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// ErrorHandler renders every error as the contract's JSON: the one place
// where errors become statuses. An *APIError is answered as it says, echo's
// own errors (404, 405, 413…) with their status, and anything else is
// logged and answered as a bare 500, so internals never leak.
func ErrorHandler(logger *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		apiErr := toAPIError(err)
		if apiErr.Code == CodeInternal && apiErr != errPanicked {
			logger.ErrorContext(c.Request().Context(), "unhandled error", "err", err, "path", c.Path())
		}
		if apiErr.RetryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(apiErr.RetryAfter))
		}
		var body ErrorBody
		body.Error.Code, body.Error.Message = apiErr.Code, apiErr.Message
		if c.Request().Method == http.MethodHead {
			err = c.NoContent(apiErr.Status)
		} else {
			err = c.JSON(apiErr.Status, body)
		}
		if err != nil {
			logger.DebugContext(c.Request().Context(), "writing error response", "err", err)
		}
	}
}

// echoCodes names echo's own errors in the contract's codes.
var echoCodes = map[int]string{
	http.StatusNotFound:              CodeNotFound,
	http.StatusMethodNotAllowed:      CodeMethodNotAllowed,
	http.StatusRequestURITooLong:     CodeURITooLong,
	http.StatusRequestEntityTooLarge: CodeTooLarge,
	http.StatusUnauthorized:          CodeUnauthorized,
	http.StatusServiceUnavailable:    CodeOverloaded,
}

func toAPIError(err error) *APIError {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr
	}
	var he *echo.HTTPError
	if !errors.As(err, &he) {
		return &APIError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
	}
	code, ok := echoCodes[he.Code]
	switch {
	case !ok && he.Code >= 500:
		code = CodeInternal
	case !ok:
		code = CodeBadRequest
	}
	return &APIError{Status: he.Code, Code: code, Message: http.StatusText(he.Code)}
}
