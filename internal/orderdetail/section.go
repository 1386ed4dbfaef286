package orderdetail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
func ReasonOf(err error) Reason {
	switch resilience.KindOf(err) {
	case resilience.KindTimeout:
		return ReasonTimeout
	case resilience.KindShortCircuited:
		return ReasonShortCircuited
	case resilience.KindRejected:
		return ReasonRejected
	case resilience.KindDeadline:
		return ReasonDeadline
	}
	return ReasonFailure
}

// Section is one dependency's part of the page.
type Section struct {
	Name     string
	Source   Source
	Degraded bool
	Reason   Reason    // empty when live
	AsOf     time.Time // when a cached answer was live; zero otherwise
	// Body is the section's content (Order, Inventory, Coupons, Logistics…).
	Body any
	// BodyKey nests Body under this key when set ("data" for the order);
	// when empty, Body's fields sit beside source/degraded.
	BodyKey string
	// Err is the dependency's error when the section is not live (for logs).
	Err error
}

// Downstream is one downstream as the page calls it, described once: its
// section's name (the JSON key), its guard, how to fetch it, how old a
// last-good answer may be, and its semantic default. Build one with
// NewSection or NewCore (internal/downstream's registry does, from each
// entry); the aggregation treats them all alike. Use it by pointer.
type Downstream struct {
	name    string
	core    bool
	bodyKey string
	guard   *resilience.Guard
	maxAge  atomic.Int64 // nanoseconds; changed at run time
	fetch   func(ctx context.Context, orderID string) (any, error)
	// decode reads a last-good payload for an order (see CacheDecoder).
	decode func(payload []byte, orderID string) (any, error)
	// fallback builds the semantic default from the resolved core's body;
	// nil for the core, which has none.
	fallback func(core any) any
}

// Name is the section's name and JSON key.
func (d *Downstream) Name() string { return d.name }

// Guard is the downstream's resilience guard.
func (d *Downstream) Guard() *resilience.Guard { return d.guard }

// MaxAge is how old a last-good answer of this downstream may be served.
func (d *Downstream) MaxAge() time.Duration { return time.Duration(d.maxAge.Load()) }

// SetMaxAge changes MaxAge at run time (admin API, config reload).
func (d *Downstream) SetMaxAge(age time.Duration) { d.maxAge.Store(int64(age)) }

// Option configures a downstream whose answer is a T.
type Option[T any] func(*options[T])

type options[T any] struct {
	decode func(payload []byte, orderID string) (T, error)
}

// CacheDecoder makes the downstream read its last-good payloads (T as JSON,
// as the aggregation writes them) with decode, which must check them as
// strictly as a live answer: what the store holds is served as the
// dependency's answer, and the store is outside the process. A payload
// decode refuses is a cache miss counted as "corrupt". Without it a payload
// is only unmarshalled (and the order's id checked).
func CacheDecoder[T any](decode func(payload []byte, orderID string) (T, error)) Option[T] {
	return func(o *options[T]) { o.decode = decode }
}

func decoderOf[T any](opts []Option[T], plain func(payload []byte, orderID string) (T, error)) func([]byte, string) (any, error) {
	o := options[T]{decode: plain}
	for _, opt := range opts {
		opt(&o)
	}
	return func(payload []byte, orderID string) (any, error) { return o.decode(payload, orderID) }
}

// NewSection describes a degradable downstream whose answer is a T. fallback
// must state "unknown" in the section's own terms — never a made-up fact.
func NewSection[T any](name string, guard *resilience.Guard, maxAge time.Duration,
	fetch func(ctx context.Context, orderID string) (T, error), fallback func(Order) T, opts ...Option[T]) *Downstream {
	d := &Downstream{
		name:     name,
		guard:    guard,
		fetch:    func(ctx context.Context, id string) (any, error) { return fetch(ctx, id) },
		decode:   decoderOf(opts, unmarshalAs[T]),
		fallback: func(core any) any { return fallback(core.(Order)) },
	}
	d.SetMaxAge(maxAge)
	return d
}

// NewCore describes the order: the section without which there is no page.
// fetch is called with the order id alone, like every section's; a 404 must
// wrap ErrNotFound.
func NewCore(guard *resilience.Guard, maxAge time.Duration, fetch func(ctx context.Context, orderID string) (Order, error), opts ...Option[Order]) *Downstream {
	d := &Downstream{
		name:    "order",
		core:    true,
		bodyKey: "data",
		guard:   guard,
		fetch:   func(ctx context.Context, id string) (any, error) { return fetch(ctx, id) },
		decode:  sameOrder(decoderOf(opts, unmarshalAs[Order])),
	}
	d.SetMaxAge(maxAge)
	return d
}

// errCorruptPayload marks a last-good payload that cannot be served.
var errCorruptPayload = errors.New("corrupt last-good payload")

func unmarshalAs[T any](payload []byte, _ string) (T, error) {
	var v T
	if err := json.Unmarshal(payload, &v); err != nil {
		return v, fmt.Errorf("%w: %T: %w", errCorruptPayload, v, err)
	}
	return v, nil
}

// sameOrder adds the order's own check to its decoder: whatever else the
// decoder checks, a page must never show another order than the one asked
// for.
func sameOrder(decode func([]byte, string) (any, error)) func([]byte, string) (any, error) {
	return func(payload []byte, orderID string) (any, error) {
		v, err := decode(payload, orderID)
		if o, ok := v.(Order); err == nil && (!ok || o.ID != orderID) {
			err = fmt.Errorf("%w: order %q cached for %q", errCorruptPayload, o.ID, orderID)
		}
		return v, err
	}
}

// The semantic defaults of the contract.

// UnknownInventory: every SKU of the order, availability unknown — never 0.
func UnknownInventory(o Order) Inventory {
	items := make([]StockItem, len(o.Items))
	for i, it := range o.Items {
		items[i] = StockItem{SKU: it.SKU, Available: nil, Status: StockUnknown}
	}
	return Inventory{Status: InventoryUnknown, Items: items}
}

// NoCoupons: an empty list, marked degraded by its section.
func NoCoupons(Order) Coupons { return Coupons{Items: []Coupon{}} }

// UnknownLogistics: the shipment's state is unknown.
func UnknownLogistics(Order) Logistics { return Logistics{Status: LogisticsUnknown} }
