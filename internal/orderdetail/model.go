package orderdetail

import "time"

// The types below are the aggregation's own view of each downstream's
// answer. Clients in internal/downstream decode their wire formats into them;
// the last-good cache stores them as JSON; the HTTP layer renders them inside
// the section envelopes of the contract. JSON names are part of the public
// contract (contract.md §2), so change them only with the contract.

// Order is the core section: without it there is no page.
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

// SKUs lists the order's SKUs in item order.
func (o Order) SKUs() []string {
	skus := make([]string, len(o.Items))
	for i, it := range o.Items {
		skus[i] = it.SKU
	}
	return skus
}

// Inventory section statuses.
const (
	InventoryConfirmed = "CONFIRMED" // every item's stock came from the inventory service
	InventoryUnknown   = "UNKNOWN"   // the inventory service could not be asked: never read as zero
)

// Stock item statuses.
const (
	StockInStock    = "IN_STOCK"
	StockLow        = "LOW_STOCK"
	StockOutOfStock = "OUT_OF_STOCK"
	StockUnknown    = "UNKNOWN"
)

// Inventory is the stock of each of the order's SKUs.
type Inventory struct {
	Status string      `json:"status"`
	Items  []StockItem `json:"items"`
}

// StockItem is one SKU's stock. Available is a pointer so that "we do not
// know" (nil, rendered as null) can never be mistaken for "none left" (0).
type StockItem struct {
	SKU       string `json:"sku"`
	Available *int   `json:"available"`
	Status    string `json:"status"`
}

// Coupons are the coupons applicable to the order.
type Coupons struct {
	Items []Coupon `json:"items"`
}

// Coupon is one applicable coupon.
type Coupon struct {
	Code          string    `json:"code"`
	Description   string    `json:"description"`
	DiscountCents int64     `json:"discount_cents"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// Logistics status used when the logistics service could not be asked.
const LogisticsUnknown = "UNKNOWN"

// Logistics is the shipment of the order.
type Logistics struct {
	Status         string          `json:"status"`
	Carrier        string          `json:"carrier,omitempty"`
	TrackingNumber string          `json:"tracking_number,omitempty"`
	ETA            *time.Time      `json:"eta,omitempty"`
	Events         []ShipmentEvent `json:"events,omitempty"`
}

// ShipmentEvent is one scan of the parcel.
type ShipmentEvent struct {
	At          time.Time `json:"at"`
	Location    string    `json:"location"`
	Description string    `json:"description"`
}
