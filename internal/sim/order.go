package sim

import (
	"fmt"
	"time"
)

// ServiceOrder is the order service; it answers an Order.
const ServiceOrder = "order"

func init() { register(ServiceOrder, "/order/v1/orders/{id}", OrderFor) }

// Order is the order service's answer. The simulator's wire types are its
// own, so that a client that misreads the wire fails a test.
type Order struct {
	ID              string      `json:"id"`
	UserID          string      `json:"user_id"`
	Status          string      `json:"status"` // PLACED, PAID, SHIPPED or DELIVERED
	CreatedAt       time.Time   `json:"created_at"`
	Currency        string      `json:"currency"`
	TotalCents      int64       `json:"total_cents"` // the items' sum
	Items           []OrderItem `json:"items"`       // 1..5, distinct SKUs
	ShippingAddress Address     `json:"shipping_address"`
}

// OrderItem is one line of an order.
type OrderItem struct {
	SKU            string `json:"sku"`
	Name           string `json:"name"`
	Quantity       int    `json:"quantity"`
	UnitPriceCents int64  `json:"unit_price_cents"`
}

// Address is an order's shipping address.
type Address struct {
	Name       string `json:"name"`
	Line1      string `json:"line1"`
	City       string `json:"city"`
	PostalCode string `json:"postal_code"`
	Country    string `json:"country"`
}

// epoch anchors every generated time, so answers never depend on the clock.
var epoch = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

var (
	countries = []struct{ code, currency, city string }{
		{"DE", "EUR", "Berlin"}, {"NL", "EUR", "Utrecht"}, {"FR", "EUR", "Lyon"}, {"GB", "GBP", "Leeds"}, {"US", "USD", "Austin"},
	}
	orderStatuses = []string{"PLACED", "PAID", "SHIPPED", "SHIPPED", "DELIVERED", "DELIVERED"}
	products      = []string{"Coffee Mug", "Desk Lamp", "Backpack", "Water Bottle", "Notebook", "Headphones", "Scarf"}
	customers     = []string{"Anna Müller", "Ben Smith", "Chloé Dubois", "David de Vries", "Emma Johnson", "Hugo Martin"}
)

// OrderFor returns the order the order service answers for id (also for
// the nf- ids it answers 404 for).
func OrderFor(id string) Order {
	g := gen(ServiceOrder, id)
	c := pick(g, countries)
	o := Order{ID: id, UserID: fmt.Sprintf("u-%05d", g.IntN(100000)), Status: pick(g, orderStatuses),
		CreatedAt: epoch.Add(time.Duration(g.IntN(365*24*60)) * time.Minute), Currency: c.currency,
		ShippingAddress: Address{Name: pick(g, customers), Line1: fmt.Sprintf("%d Main Street", between(g, 1, 200)),
			City: c.city, PostalCode: fmt.Sprintf("%05d", g.IntN(100000)), Country: c.code}}
	first := between(g, 1000, 9000) // SKUs 7 apart from here: distinct
	for i := range between(g, 1, 5) {
		it := OrderItem{SKU: fmt.Sprintf("SKU-%04d", first+7*i), Name: pick(g, products),
			Quantity: between(g, 1, 3), UnitPriceCents: int64(between(g, 2, 150)*100 - 1)}
		o.Items = append(o.Items, it)
		o.TotalCents += int64(it.Quantity) * it.UnitPriceCents
	}
	return o
}
