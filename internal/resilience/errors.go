package resilience

import (
	"context"
	"errors"
)

// Kind is the outcome of a guarded call or attempt; metrics, fallbacks, the
// breaker and logs all read the same kinds.
type Kind uint8

const (
	KindSuccess        Kind = iota // a usable answer
	KindFailure                    // a bad answer (5xx, garbage, refused connection): counts against the dependency, may be retried
	KindTimeout                    // no answer within the sub-budget: counts against the dependency
	KindShortCircuited             // the breaker is open: nothing was called
	KindRejected                   // the bulkhead is full: nothing was called
	KindBadRequest                 // the caller's fault (a 404, another 4xx): never counted against the dependency, never retried
	KindDeadline                   // the caller's deadline or bound ran out, or it went away: not the dependency's fault
)

var kindNames = [...]string{"success", "failure", "timeout", "short_circuited", "rejected", "bad_request", "deadline"}

// String is the kind's event name (success, failure, timeout, …).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// The kinds' sentinels: errors.Is(err, resilience.ErrTimeout) is true of an
// *Error of KindTimeout.
var (
	ErrFailure        = errors.New("dependency failed")
	ErrTimeout        = errors.New("dependency timed out")
	ErrShortCircuited = errors.New("circuit breaker open")
	ErrRejected       = errors.New("bulkhead full")
	ErrBadRequest     = errors.New("bad request")
	ErrDeadline       = errors.New("no budget left")
	sentinels         = [...]error{errors.New("success"), ErrFailure, ErrTimeout, ErrShortCircuited, ErrRejected, ErrBadRequest, ErrDeadline}
)

// Error is what DoUntil returns when a call did not succeed: its Kind (never
// KindSuccess), and the last attempt's error or the cause of a refusal (nil
// if none).
type Error struct {
	Dependency string
	Kind       Kind
	Err        error
}

func (e *Error) Error() string {
	msg := e.Dependency + ": " + sentinels[e.Kind].Error()
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is matches the sentinel of e's kind.
func (e *Error) Is(target error) bool { return target == sentinels[e.Kind] }

// Unwrap returns the underlying error, for errors.Is to see the dependency's own.
func (e *Error) Unwrap() error { return e.Err }

// KindOf classifies any error: nil is success, an *Error keeps its kind, a
// sentinel maps to its kind, a context error is a deadline, and anything
// else is a failure.
func KindOf(err error) Kind {
	if err == nil {
		return KindSuccess
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Kind
	}
	for k, s := range sentinels {
		if errors.Is(err, s) {
			return Kind(k)
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return KindDeadline
	}
	return KindFailure
}

// BadRequest marks err as the caller's fault (say, a 404 from the
// dependency): the guard returns it at once, never retries it and never
// counts it against the dependency.
func BadRequest(err error) error { return &badRequest{err} }

type badRequest struct{ err error }

func (b *badRequest) Error() string        { return b.err.Error() }
func (b *badRequest) Unwrap() error        { return b.err }
func (b *badRequest) Is(target error) bool { return target == ErrBadRequest }
