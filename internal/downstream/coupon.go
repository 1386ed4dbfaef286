package downstream

import (
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// Coupons are the coupons applicable to the order.
type Coupons struct {
	Items []Coupon `json:"items"` // never nil
}

// Coupon is one applicable coupon.
type Coupon struct {
	Code          string    `json:"code"`
	Description   string    `json:"description"`
	DiscountCents int64     `json:"discount_cents"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// noCoupons, the default: an empty list, marked degraded by its section.
func noCoupons(Order) Coupons { return Coupons{Items: []Coupon{}} }

// couponAPI: the service answers {"order_id", "coupons": [Coupon]}.
var couponAPI = API[Coupons]{
	Path: "/coupon/v1/orders/{id}/coupons",
	Decode: Wire(func(w struct {
		Envelope
		Coupons []Coupon `json:"coupons"`
	}) Coupons {
		return Coupons{Items: w.Coupons}
	}),
	Check: func(cs Coupons, _ string) error {
		var c Check
		c.That(cs.Items != nil, "coupons", "is missing")
		for i, cp := range cs.Items {
			c.At(cp.Code != "", "coupons", i, "code", "is empty")
			c.At(cp.DiscountCents >= 0, "coupons", i, "discount_cents", "is negative")
			c.At(!cp.ExpiresAt.IsZero(), "coupons", i, "expires_at", "is missing")
		}
		return c.Err()
	},
}

func init() {
	Register(Entry{
		Name: "coupon", Section: "coupons", Place: 2,
		Defaults:    resilience.Config{Timeout: 300 * time.Millisecond},
		CacheMaxAge: 5 * time.Minute,
		About:       "decoration: its default is an empty list.",
		Why: map[string]string{
			"timeout":       "an empty list is an honest default, so the smallest budget",
			"cache_max_age": "campaigns change over minutes, not seconds",
		},
		New: SectionOf(couponAPI, noCoupons),
	})
}
