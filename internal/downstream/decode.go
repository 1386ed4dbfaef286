package downstream

import (
	"encoding/json"
	"fmt"
	"slices"
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
	return orderRules(w, orderID)
}

// orderRules checks an order field by field, live or cached.
func orderRules(w wireOrder, orderID string) (orderdetail.Order, error) {
	var c Check
	c.OrderID(Top("id"), w.ID, orderID)
	o := orderdetail.Order{
		ID:         orderID,
		UserID:     c.NonEmpty(Top("user_id"), w.UserID),
		Status:     c.Token(Top("status"), w.Status),
		CreatedAt:  c.Time(Top("created_at"), w.CreatedAt),
		Currency:   c.Str(Top("currency"), w.Currency),
		TotalCents: AtLeast(&c, Top("total_cents"), w.TotalCents, 0),
	}
	if c.Err() == nil && !isCurrency(o.Currency) {
		c.Fail("currency %q is not an ISO 4217 code", o.Currency)
	}
	c.List("items", w.Items == nil)
	o.Items = make([]orderdetail.OrderItem, 0, len(w.Items))
	for i, it := range w.Items {
		o.Items = append(o.Items, orderdetail.OrderItem{
			SKU:            c.NonEmpty(Elem("items", i, "sku"), it.SKU),
			Name:           c.Str(Elem("items", i, "name"), it.Name),
			Quantity:       AtLeast(&c, Elem("items", i, "quantity"), it.Quantity, 1),
			UnitPriceCents: AtLeast(&c, Elem("items", i, "unit_price_cents"), it.UnitPriceCents, 0),
		})
	}
	if a := w.ShippingAddress; a == nil {
		c.Fail("shipping_address is missing")
	} else {
		o.ShippingAddress = orderdetail.Address{
			Name:    c.Str(Top("shipping_address.name"), a.Name),
			Line1:   c.Str(Top("shipping_address.line1"), a.Line1),
			City:    c.Str(Top("shipping_address.city"), a.City),
			Postal:  c.Str(Top("shipping_address.postal_code"), a.PostalCode),
			Country: c.NonEmpty(Top("shipping_address.country"), a.Country),
		}
	}
	if c.Err() != nil {
		return orderdetail.Order{}, c.Err()
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
	return stockRules(w, orderID)
}

// stockRules checks a stock answer field by field, live or cached.
func stockRules(w wireStock, orderID string) (orderdetail.Inventory, error) {
	var c Check
	c.OrderID(Top("order_id"), w.OrderID, orderID)
	c.List("items", w.Items == nil)
	inv := orderdetail.Inventory{Status: orderdetail.InventoryConfirmed, Items: make([]orderdetail.StockItem, 0, len(w.Items))}
	// A stock list is a handful of lines: comparing with those before is
	// cheaper than a map per answer. A long one gets the map.
	var seen map[string]bool
	if len(w.Items) > linearScanMax {
		seen = make(map[string]bool, len(w.Items))
	}
	for i, it := range w.Items {
		sku := c.NonEmpty(Elem("items", i, "sku"), it.SKU)
		avail := AtLeast(&c, Elem("items", i, "available"), it.Available, 0)
		dup := false
		if seen != nil {
			dup, seen[sku] = seen[sku], true
		} else {
			dup = slices.ContainsFunc(inv.Items, func(it orderdetail.StockItem) bool { return it.SKU == sku })
		}
		if dup {
			c.Fail("items[%d].sku %q is listed twice", i, sku)
		}
		inv.Items = append(inv.Items, orderdetail.StockItem{SKU: sku, Available: &avail, Status: StockStatus(avail)})
	}
	if c.Err() != nil {
		return orderdetail.Inventory{}, c.Err()
	}
	return inv, nil
}

// linearScanMax is the longest stock list checked for duplicates by a scan.
const linearScanMax = 16

// decodeCoupons decodes the coupon service's answer for orderID. Items is
// never nil.
func decodeCoupons(body []byte, orderID string) (orderdetail.Coupons, error) {
	var w wireCoupons
	if err := unmarshal(body, &w); err != nil {
		return orderdetail.Coupons{}, err
	}
	return couponRules(w, orderID)
}

// couponRules checks a coupon answer field by field, live or cached.
func couponRules(w wireCoupons, orderID string) (orderdetail.Coupons, error) {
	var c Check
	c.OrderID(Top("order_id"), w.OrderID, orderID)
	c.List("coupons", w.Coupons == nil)
	out := orderdetail.Coupons{Items: make([]orderdetail.Coupon, 0, len(w.Coupons))}
	for i, cp := range w.Coupons {
		out.Items = append(out.Items, orderdetail.Coupon{
			Code:          c.NonEmpty(Elem("coupons", i, "code"), cp.Code),
			Description:   c.Str(Elem("coupons", i, "description"), cp.Description),
			DiscountCents: AtLeast(&c, Elem("coupons", i, "discount_cents"), cp.DiscountCents, 0),
			ExpiresAt:     c.Time(Elem("coupons", i, "expires_at"), cp.ExpiresAt),
		})
	}
	if c.Err() != nil {
		return orderdetail.Coupons{}, c.Err()
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
	return shipmentRules(w, orderID)
}

// shipmentRules checks a shipment field by field, live or cached.
func shipmentRules(w wireShipment, orderID string) (orderdetail.Logistics, error) {
	var c Check
	c.OrderID(Top("order_id"), w.OrderID, orderID)
	l := orderdetail.Logistics{Status: c.Token(Top("status"), w.Status)}
	if w.Carrier != nil {
		l.Carrier = *w.Carrier
	}
	if w.TrackingNumber != nil {
		l.TrackingNumber = *w.TrackingNumber
	}
	if w.ETA != nil {
		eta := c.Time(Top("eta"), w.ETA)
		l.ETA = &eta
	}
	if len(w.Events) > 0 {
		l.Events = make([]orderdetail.ShipmentEvent, 0, len(w.Events))
	}
	for i, e := range w.Events {
		l.Events = append(l.Events, orderdetail.ShipmentEvent{
			At:          c.Time(Elem("events", i, "at"), e.At),
			Location:    c.Str(Elem("events", i, "location"), e.Location),
			Description: c.NonEmpty(Elem("events", i, "description"), e.Description),
		})
	}
	if c.Err() != nil {
		return orderdetail.Logistics{}, c.Err()
	}
	return l, nil
}
