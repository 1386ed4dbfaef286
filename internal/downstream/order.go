package downstream

import (
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// Order is the core section: without it there is no page. Its JSON is the
// order service's answer, and the page's "data".
type Order struct {
	ID              string      `json:"id"`
	UserID          string      `json:"user_id"`
	Status          string      `json:"status"`
	CreatedAt       time.Time   `json:"created_at"`
	Currency        string      `json:"currency"`
	TotalCents      int64       `json:"total_cents"`
	Items           []OrderItem `json:"items"`
	ShippingAddress Address     `json:"shipping_address"`
}

// OrderItem is one line of an order.
type OrderItem struct {
	SKU            string `json:"sku"`
	Name           string `json:"name"`
	Quantity       int    `json:"quantity"`
	UnitPriceCents int64  `json:"unit_price_cents"`
}

// Address is where the order ships to.
type Address struct {
	Name    string `json:"name"`
	Line1   string `json:"line1"`
	City    string `json:"city"`
	Postal  string `json:"postal_code"`
	Country string `json:"country"`
}

// orderAPI: the service answers an Order.
var orderAPI = API[Order]{
	Path: "/order/v1/orders/{id}",
	Check: func(o Order, orderID string) error {
		var c Check
		c.That(o.ID == orderID, "id", "is not the requested "+orderID)
		c.That(o.UserID != "", "user_id", "is empty")
		c.That(IsToken(o.Status), "status", "is not an upper-case token")
		c.That(!o.CreatedAt.IsZero(), "created_at", "is missing")
		c.That(len(o.Currency) == 3 && IsToken(o.Currency), "currency", "is not an ISO 4217 code")
		c.That(o.TotalCents >= 0, "total_cents", "is negative")
		c.That(o.Items != nil, "items", "is missing")
		for i, it := range o.Items {
			c.At(it.SKU != "", "items", i, "sku", "is empty")
			c.At(it.Quantity >= 1, "items", i, "quantity", "is below 1")
			c.At(it.UnitPriceCents >= 0, "items", i, "unit_price_cents", "is negative")
		}
		c.That(o.ShippingAddress.Country != "", "shipping_address.country", "is empty")
		return c.Err()
	},
}

func init() {
	Register(Entry{
		Name: "order", Section: "order", Core: true,
		Defaults:    resilience.Config{Timeout: time.Second, Retry: resilience.RetryConfig{MaxAttempts: 2}},
		CacheMaxAge: 24 * time.Hour,
		About:       "the core section: without it (live or cached) the answer is a 503.",
		Why: map[string]string{
			"timeout":            "largest sub-budget that leaves a cache read and the reserve: 1000+50+100 < 1500",
			"retry.max_attempts": "one retry: a transient failure would cost the whole page; a third could not fit",
			"cache_max_age":      "header data changes rarely and the section shows as_of: a day-old order beats a 503",
		},
		New: CoreOf(orderAPI),
	})
}
