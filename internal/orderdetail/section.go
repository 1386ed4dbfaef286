package orderdetail

import (
	"cmp"
	"context"
	"sync/atomic"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// Source says where a section's content came from.
type Source string

const (
	SourceLive     Source = "live"     // answered by the dependency during this request
	SourceCache    Source = "cache"    // the dependency's last good answer, with its age
	SourceFallback Source = "fallback" // the semantic default: "we do not know"
)

// Reason says why a section is not live. It is the resilience error kind in
// the contract's words, so logs, metrics and answers agree.
type Reason string

const (
	ReasonTimeout        Reason = "TIMEOUT"
	ReasonFailure        Reason = "FAILURE"
	ReasonShortCircuited Reason = "SHORT_CIRCUITED"
	ReasonRejected       Reason = "REJECTED"
	ReasonDeadline       Reason = "DEADLINE"
)

// ReasonOf maps a guarded call's error to the contract's reason.
func ReasonOf(err error) Reason { return cmp.Or(reasons[resilience.KindOf(err)], ReasonFailure) }

var reasons = map[resilience.Kind]Reason{resilience.KindTimeout: ReasonTimeout, resilience.KindShortCircuited: ReasonShortCircuited,
	resilience.KindRejected: ReasonRejected, resilience.KindDeadline: ReasonDeadline}

// Page is the assembled order-detail answer.
type Page struct {
	OrderID  string
	Degraded bool      // any section is not live
	Sections []Section // the core first, then in Config.Sections' order
}

// Section is one dependency's part of the page.
type Section struct {
	Name     string
	Source   Source
	Degraded bool
	Reason   Reason    // empty when live
	AsOf     time.Time // when a cached answer was live; zero otherwise
	Body     any       // the dependency's answer, or its semantic default
	// BodyJSON is Body as JSON when the section is live (the bytes the
	// last-good store is given); nil otherwise.
	BodyJSON []byte
	// BodyKey nests Body under this key when set ("data" for the order);
	// when empty, Body's fields sit beside source/degraded.
	BodyKey string
	// Err is the dependency's error when the section is not live (for logs).
	Err error
}

// Downstream is one dependency as the page calls it. Make one with NewCore
// or NewSection; use it by pointer.
type Downstream struct {
	name     string
	core     bool
	bodyKey  string
	guard    *resilience.Guard
	maxAge   atomic.Int64 // nanoseconds; changed at run time
	fetch    func(ctx context.Context, orderID string) (any, error)
	decode   func(payload []byte, orderID string) (any, error)
	fallback func(core any) any // nil for the core
}

// Spec describes a downstream whose answer is a T.
type Spec[T any] struct {
	Name   string            // the section's name: its JSON key and its key in the store
	Guard  *resilience.Guard // every call goes through it
	MaxAge time.Duration     // how old a last-good answer may be and still be served
	// Fetch asks the dependency for orderID's answer (errors: see ErrNotFound).
	Fetch func(ctx context.Context, orderID string) (T, error)
	// Decode reads a last-good payload (T as JSON) for orderID as strictly
	// as a live answer: the store is outside the process. An error makes
	// the payload a cache miss counted as "corrupt".
	Decode func(payload []byte, orderID string) (T, error)
	// Fallback is the semantic default, given the core's body: "unknown" in
	// the section's own terms, never a made-up fact. Unused for the core.
	Fallback func(core any) T
}

func newDownstream[T any](s Spec[T]) *Downstream {
	d := &Downstream{
		name:   s.Name,
		guard:  s.Guard,
		fetch:  func(ctx context.Context, id string) (any, error) { return s.Fetch(ctx, id) },
		decode: func(p []byte, id string) (any, error) { return s.Decode(p, id) },
	}
	d.SetMaxAge(s.MaxAge)
	return d
}

// NewCore describes the core (the order): without its answer, live or
// cached, there is no page, and its 404 ends the request. Its body nests
// under "data" in the page.
func NewCore[T any](s Spec[T]) *Downstream {
	d := newDownstream(s)
	d.core, d.bodyKey = true, "data"
	return d
}

// NewSection describes a degradable downstream: without an answer it shows
// s.Fallback.
func NewSection[T any](s Spec[T]) *Downstream {
	d := newDownstream(s)
	d.fallback = func(core any) any { return s.Fallback(core) }
	return d
}

// Name is the section's name and JSON key.
func (d *Downstream) Name() string { return d.name }

// Guard is the downstream's resilience guard.
func (d *Downstream) Guard() *resilience.Guard { return d.guard }

// MaxAge is how old a last-good answer of this downstream may be served.
func (d *Downstream) MaxAge() time.Duration { return time.Duration(d.maxAge.Load()) }

// SetMaxAge changes MaxAge at run time (admin API, config reload).
func (d *Downstream) SetMaxAge(age time.Duration) { d.maxAge.Store(int64(age)) }
