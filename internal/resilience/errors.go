package resilience

import (
	"context"
	"errors"
)

// Kind classifies the outcome of one guarded call. Metrics, fallbacks,
// breakers and logs all read the same kinds, so a timeout is never counted as
// a rejection and a rejection is never counted as a failure.
type Kind uint8

const (
	// KindSuccess: the call returned a usable answer.
	KindSuccess Kind = iota
	// KindFailure: the dependency answered badly (5xx, garbage, refused
	// connection). Counts against its health and may be retried.
	KindFailure
	// KindTimeout: the dependency did not answer within its sub-budget.
	// Counts against its health.
	KindTimeout
	// KindShortCircuited: the breaker is open; the dependency was not called.
	KindShortCircuited
	// KindRejected: the bulkhead was full; the dependency was not called.
	KindRejected
	// KindBadRequest: the dependency said the request itself was wrong (a 4xx
	// such as 404). Not the dependency's fault: never counts against it,
	// never retried.
	KindBadRequest
	// KindDeadline: the caller's own deadline ran out or the caller went away
	// (no budget left). Not the dependency's fault.
	KindDeadline
)

var kindNames = [...]string{
	KindSuccess:        "success",
	KindFailure:        "failure",
	KindTimeout:        "timeout",
	KindShortCircuited: "short_circuited",
	KindRejected:       "rejected",
	KindBadRequest:     "bad_request",
	KindDeadline:       "deadline",
}

// String returns the kind's metric name (success, failure, timeout, …).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Sentinel errors, one per kind the guard produces itself. Errors returned by
// Do wrap one of them, so errors.Is(err, resilience.ErrTimeout) reads as prose.
var (
	ErrFailure        = errors.New("dependency failed")
	ErrTimeout        = errors.New("dependency timed out")
	ErrShortCircuited = errors.New("circuit breaker open")
	ErrRejected       = errors.New("bulkhead full")
	ErrBadRequest     = errors.New("bad request")
	ErrDeadline       = errors.New("no budget left")
)

func (k Kind) sentinel() error {
	switch k {
	case KindFailure:
		return ErrFailure
	case KindTimeout:
		return ErrTimeout
	case KindShortCircuited:
		return ErrShortCircuited
	case KindRejected:
		return ErrRejected
	case KindBadRequest:
		return ErrBadRequest
	case KindDeadline:
		return ErrDeadline
	}
	return nil
}

// Error is what Do returns when a call did not succeed. It carries the kind,
// the dependency and the last underlying error (nil for rejections and short
// circuits, where nothing was called). Treat it as read-only: rejections and
// short circuits of one guard share a single value.
type Error struct {
	Dependency string
	Kind       Kind
	Attempts   int   // physical attempts made, hedges included
	Err        error // last underlying error, if any
}

func (e *Error) Error() string {
	msg := e.Dependency + ": " + e.Kind.sentinel().Error()
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrTimeout) and friends work.
func (e *Error) Is(target error) bool { return target == e.Kind.sentinel() }

// Unwrap returns the underlying error, so errors.Is(err, downstream.ErrX) works too.
func (e *Error) Unwrap() error { return e.Err }

// KindOf classifies any error: nil is success, a *Error keeps its kind, the
// package's sentinels map to their kinds, a context error is a deadline, and
// anything else is a failure.
func KindOf(err error) Kind {
	if err == nil {
		return KindSuccess
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	switch {
	case errors.Is(err, ErrBadRequest):
		return KindBadRequest
	case errors.Is(err, ErrTimeout):
		return KindTimeout
	case errors.Is(err, ErrRejected):
		return KindRejected
	case errors.Is(err, ErrShortCircuited):
		return KindShortCircuited
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, ErrDeadline):
		return KindDeadline
	}
	return KindFailure
}

// BadRequest marks err as the caller's fault (for example a 404 or a 400 from
// the dependency): the guard returns it at once, never retries it and never
// counts it against the dependency.
func BadRequest(err error) error { return &badRequest{err} }

type badRequest struct{ err error }

func (b *badRequest) Error() string        { return b.err.Error() }
func (b *badRequest) Unwrap() error        { return b.err }
func (b *badRequest) Is(target error) bool { return target == ErrBadRequest }
