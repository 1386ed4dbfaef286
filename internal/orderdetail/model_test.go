package orderdetail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// The tests' own downstream answers, shaped like the real ones
// (internal/downstream), which this package knows nothing about.

type Order struct {
	ID    string      `json:"id"`
	Items []OrderItem `json:"items"`
}

type OrderItem struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

type Inventory struct {
	Status string      `json:"status"`
	Items  []StockItem `json:"items"`
}

type StockItem struct {
	SKU       string `json:"sku"`
	Available *int   `json:"available"`
	Status    string `json:"status"`
}

type Coupons struct {
	Items []Coupon `json:"items"`
}

type Coupon struct {
	Code          string `json:"code"`
	DiscountCents int64  `json:"discount_cents"`
}

type Logistics struct {
	Status string `json:"status"`
}

const (
	InventoryConfirmed = "CONFIRMED"
	InventoryUnknown   = "UNKNOWN"
	StockLow           = "LOW_STOCK"
	StockUnknown       = "UNKNOWN"
	LogisticsUnknown   = "UNKNOWN"
)

func UnknownInventory(o Order) Inventory {
	items := make([]StockItem, len(o.Items))
	for i, it := range o.Items {
		items[i] = StockItem{SKU: it.SKU, Status: StockUnknown}
	}
	return Inventory{Status: InventoryUnknown, Items: items}
}

func NoCoupons(Order) Coupons { return Coupons{Items: []Coupon{}} }

func UnknownLogistics(Order) Logistics { return Logistics{Status: LogisticsUnknown} }

var errCorruptPayload = errors.New("corrupt last-good payload")

// unmarshalAs reads a payload as plain JSON; an order must be the one
// asked for.
func unmarshalAs[T any](payload []byte, orderID string) (T, error) {
	var v T
	if err := json.Unmarshal(payload, &v); err != nil {
		return v, fmt.Errorf("%w: %w", errCorruptPayload, err)
	}
	if o, ok := any(v).(Order); ok && o.ID != orderID {
		return v, fmt.Errorf("%w: order %q cached for %q", errCorruptPayload, o.ID, orderID)
	}
	return v, nil
}

// newCore and newSection describe the tests' downstreams; a section's
// payloads are read by decode, or else by unmarshalAs.
func newCore(g *resilience.Guard, maxAge time.Duration, fetch func(context.Context, string) (Order, error)) *Downstream {
	return NewCore(Spec[Order]{Name: "order", Guard: g, MaxAge: maxAge, Fetch: fetch, Decode: unmarshalAs[Order]})
}

func newSection[T any](name string, g *resilience.Guard, maxAge time.Duration, fetch func(context.Context, string) (T, error),
	fallback func(Order) T, decode ...func([]byte, string) (T, error)) *Downstream {
	s := Spec[T]{Name: name, Guard: g, MaxAge: maxAge, Fetch: fetch, Decode: unmarshalAs[T], Fallback: func(core any) T { return fallback(core.(Order)) }}
	if len(decode) > 0 {
		s.Decode = decode[0]
	}
	return NewSection(s)
}
