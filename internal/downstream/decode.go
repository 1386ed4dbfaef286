package downstream

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// The wire documents, as pointers so that a missing or null field can be
// told from a zero one. Unknown fields are ignored; json.Unmarshal rejects
// invalid JSON, trailing data and wrong types.

type wireOrder struct {
	ID              *string         `json:"id"`
	UserID          *string         `json:"user_id"`
	Status          *string         `json:"status"`
	CreatedAt       *time.Time      `json:"created_at"`
	Currency        *string         `json:"currency"`
	TotalCents      *int64          `json:"total_cents"`
	Items           []wireOrderItem `json:"items"`
	ShippingAddress *wireAddress    `json:"shipping_address"`
}

type wireOrderItem struct {
	SKU            *string `json:"sku"`
	Name           *string `json:"name"`
	Quantity       *int    `json:"quantity"`
	UnitPriceCents *int64  `json:"unit_price_cents"`
}

type wireAddress struct {
	Name       *string `json:"name"`
	Line1      *string `json:"line1"`
	City       *string `json:"city"`
	PostalCode *string `json:"postal_code"`
	Country    *string `json:"country"`
}

type wireStock struct {
	OrderID *string         `json:"order_id"`
	Items   []wireStockItem `json:"items"`
}

type wireStockItem struct {
	SKU       *string `json:"sku"`
	Available *int    `json:"available"`
}

type wireCoupons struct {
	OrderID *string      `json:"order_id"`
	Coupons []wireCoupon `json:"coupons"`
}

type wireCoupon struct {
	Code          *string    `json:"code"`
	Description   *string    `json:"description"`
	DiscountCents *int64     `json:"discount_cents"`
	ExpiresAt     *time.Time `json:"expires_at"`
}

type wireShipment struct {
	OrderID        *string     `json:"order_id"`
	Status         *string     `json:"status"`
	Carrier        *string     `json:"carrier"`
	TrackingNumber *string     `json:"tracking_number"`
	ETA            *time.Time  `json:"eta"`
	Events         []wireEvent `json:"events"`
}

type wireEvent struct {
	At          *time.Time `json:"at"`
	Location    *string    `json:"location"`
	Description *string    `json:"description"`
}

// check collects the first validation failure, so a decoder reads as a list
// of field rules.
type check struct{ err error }

// field names a field for an error message: "user_id", or "items[3].sku"
// for one in a list. It is formatted only when a rule fails, so checking a
// healthy answer costs no allocation per field.
type field struct {
	list string // the list's key; empty for a top-level field
	i    int    // the element's index in list
	key  string
}

func top(key string) field                      { return field{key: key} }
func elem(list string, i int, key string) field { return field{list: list, i: i, key: key} }

func (f field) String() string {
	if f.list == "" {
		return f.key
	}
	return f.list + "[" + strconv.Itoa(f.i) + "]." + f.key
}

func (c *check) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
}

func (c *check) str(name field, p *string) string {
	if p == nil {
		c.fail("%s is missing", name)
		return ""
	}
	return *p
}

func (c *check) nonEmpty(name field, p *string) string {
	s := c.str(name, p)
	if p != nil && s == "" {
		c.fail("%s is empty", name)
	}
	return s
}

// token requires an upper-case enum value such as IN_TRANSIT: anything else
// is not a status this API would send.
func (c *check) token(name field, p *string) string {
	s := c.nonEmpty(name, p)
	if len(s) > 64 {
		c.fail("%s is longer than 64 bytes", name)
		return s
	}
	for i, r := range s {
		if !(r >= 'A' && r <= 'Z' || i > 0 && (r == '_' || r >= '0' && r <= '9')) {
			c.fail("%s %q is not an upper-case token", name, s)
			break
		}
	}
	return s
}

func (c *check) orderID(name field, p *string, want string) {
	if got := c.nonEmpty(name, p); p != nil && got != "" && got != want {
		c.fail("%s %q is not the requested %q", name, got, want)
	}
}

func atLeast[T int | int64](c *check, name field, p *T, lo T) T {
	if p == nil {
		c.fail("%s is missing", name)
		return 0
	}
	if *p < lo {
		c.fail("%s is %d, below %d", name, *p, lo)
	}
	return *p
}

func (c *check) time(name field, p *time.Time) time.Time {
	if p == nil {
		c.fail("%s is missing", name)
		return time.Time{}
	}
	if p.IsZero() {
		c.fail("%s is the zero time", name)
	}
	return *p
}

func (c *check) list(name string, isNil bool) {
	if isNil {
		c.fail("%s is missing", name)
	}
}

func unmarshal(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// decodeOrder decodes the order service's answer for orderID.
func decodeOrder(body []byte, orderID string) (orderdetail.Order, error) {
	var w wireOrder
	if err := unmarshal(body, &w); err != nil {
		return orderdetail.Order{}, err
	}
	var c check
	c.orderID(top("id"), w.ID, orderID)
	o := orderdetail.Order{
		ID:         orderID,
		UserID:     c.nonEmpty(top("user_id"), w.UserID),
		Status:     c.token(top("status"), w.Status),
		CreatedAt:  c.time(top("created_at"), w.CreatedAt),
		Currency:   c.str(top("currency"), w.Currency),
		TotalCents: atLeast(&c, top("total_cents"), w.TotalCents, 0),
	}
	if c.err == nil && !isCurrency(o.Currency) {
		c.fail("currency %q is not an ISO 4217 code", o.Currency)
	}
	c.list("items", w.Items == nil)
	o.Items = make([]orderdetail.OrderItem, 0, len(w.Items))
	for i, it := range w.Items {
		o.Items = append(o.Items, orderdetail.OrderItem{
			SKU:            c.nonEmpty(elem("items", i, "sku"), it.SKU),
			Name:           c.str(elem("items", i, "name"), it.Name),
			Quantity:       atLeast(&c, elem("items", i, "quantity"), it.Quantity, 1),
			UnitPriceCents: atLeast(&c, elem("items", i, "unit_price_cents"), it.UnitPriceCents, 0),
		})
	}
	if a := w.ShippingAddress; a == nil {
		c.fail("shipping_address is missing")
	} else {
		o.ShippingAddress = orderdetail.Address{
			Name:    c.str(top("shipping_address.name"), a.Name),
			Line1:   c.str(top("shipping_address.line1"), a.Line1),
			City:    c.str(top("shipping_address.city"), a.City),
			Postal:  c.str(top("shipping_address.postal_code"), a.PostalCode),
			Country: c.nonEmpty(top("shipping_address.country"), a.Country),
		}
	}
	if c.err != nil {
		return orderdetail.Order{}, c.err
	}
	return o, nil
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for _, r := range s {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}

// Stock thresholds: 0 is out of stock, 1..LowStockMax is low, more is in
// stock.
const LowStockMax = 5

// StockStatus names the stock status of an available count.
func StockStatus(available int) string {
	switch {
	case available <= 0:
		return orderdetail.StockOutOfStock
	case available <= LowStockMax:
		return orderdetail.StockLow
	default:
		return orderdetail.StockInStock
	}
}

// decodeInventory decodes the inventory service's answer for orderID.
func decodeInventory(body []byte, orderID string) (orderdetail.Inventory, error) {
	var w wireStock
	if err := unmarshal(body, &w); err != nil {
		return orderdetail.Inventory{}, err
	}
	var c check
	c.orderID(top("order_id"), w.OrderID, orderID)
	c.list("items", w.Items == nil)
	inv := orderdetail.Inventory{Status: orderdetail.InventoryConfirmed, Items: make([]orderdetail.StockItem, 0, len(w.Items))}
	seen := make(map[string]bool, len(w.Items))
	for i, it := range w.Items {
		sku := c.nonEmpty(elem("items", i, "sku"), it.SKU)
		avail := atLeast(&c, elem("items", i, "available"), it.Available, 0)
		if seen[sku] {
			c.fail("items[%d].sku %q is listed twice", i, sku)
		}
		seen[sku] = true
		inv.Items = append(inv.Items, orderdetail.StockItem{SKU: sku, Available: &avail, Status: StockStatus(avail)})
	}
	if c.err != nil {
		return orderdetail.Inventory{}, c.err
	}
	return inv, nil
}

// decodeCoupons decodes the coupon service's answer for orderID. Items is
// never nil.
func decodeCoupons(body []byte, orderID string) (orderdetail.Coupons, error) {
	var w wireCoupons
	if err := unmarshal(body, &w); err != nil {
		return orderdetail.Coupons{}, err
	}
	var c check
	c.orderID(top("order_id"), w.OrderID, orderID)
	c.list("coupons", w.Coupons == nil)
	out := orderdetail.Coupons{Items: make([]orderdetail.Coupon, 0, len(w.Coupons))}
	for i, cp := range w.Coupons {
		out.Items = append(out.Items, orderdetail.Coupon{
			Code:          c.nonEmpty(elem("coupons", i, "code"), cp.Code),
			Description:   c.str(elem("coupons", i, "description"), cp.Description),
			DiscountCents: atLeast(&c, elem("coupons", i, "discount_cents"), cp.DiscountCents, 0),
			ExpiresAt:     c.time(elem("coupons", i, "expires_at"), cp.ExpiresAt),
		})
	}
	if c.err != nil {
		return orderdetail.Coupons{}, c.err
	}
	return out, nil
}

// decodeLogistics decodes the logistics service's answer for orderID. Only
// order_id and status are mandatory: a shipment being prepared has no
// tracking number and no events yet.
func decodeLogistics(body []byte, orderID string) (orderdetail.Logistics, error) {
	var w wireShipment
	if err := unmarshal(body, &w); err != nil {
		return orderdetail.Logistics{}, err
	}
	var c check
	c.orderID(top("order_id"), w.OrderID, orderID)
	l := orderdetail.Logistics{Status: c.token(top("status"), w.Status)}
	if w.Carrier != nil {
		l.Carrier = *w.Carrier
	}
	if w.TrackingNumber != nil {
		l.TrackingNumber = *w.TrackingNumber
	}
	if w.ETA != nil {
		eta := c.time(top("eta"), w.ETA)
		l.ETA = &eta
	}
	if len(w.Events) > 0 {
		l.Events = make([]orderdetail.ShipmentEvent, 0, len(w.Events))
	}
	for i, e := range w.Events {
		l.Events = append(l.Events, orderdetail.ShipmentEvent{
			At:          c.time(elem("events", i, "at"), e.At),
			Location:    c.str(elem("events", i, "location"), e.Location),
			Description: c.nonEmpty(elem("events", i, "description"), e.Description),
		})
	}
	if c.err != nil {
		return orderdetail.Logistics{}, c.err
	}
	return l, nil
}
