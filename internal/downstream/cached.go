package downstream

import (
	"github.com/orderagg/orderagg/internal/orderdetail"
)

// Last-good payloads are decoded answers (orderdetail's types) as JSON,
// written by the aggregation and read back from Redis, where anything with
// access to Redis can change them. They pass the same field rules as a live
// answer before they are served: a page from the cache must not say what no
// live answer could have said.
//
// A payload uses orderdetail's JSON names (contract §2). For the order they
// are the wire's; the sections differ a little, and their payloads leave
// out the order id, which is the entry's key: an id, when present, must
// still be the requested one.

// decodeCachedOrder checks a cached order: its JSON is the wire's.
func decodeCachedOrder(payload []byte, orderID string) (orderdetail.Order, error) {
	return decodeOrder(payload, orderID)
}

type cachedStock struct {
	OrderID *string           `json:"order_id"`
	Status  *string           `json:"status"`
	Items   []cachedStockItem `json:"items"`
}

type cachedStockItem struct {
	wireStockItem
	Status *string `json:"status"`
}

// decodeCachedInventory checks cached stock with the live rules, and the
// statuses the live decoder derived with how it derives them: only a
// CONFIRMED answer is ever cached.
func decodeCachedInventory(payload []byte, orderID string) (orderdetail.Inventory, error) {
	var cw cachedStock
	if err := unmarshal(payload, &cw); err != nil {
		return orderdetail.Inventory{}, err
	}
	w := wireStock{OrderID: keyed(cw.OrderID, orderID)}
	if cw.Items != nil {
		w.Items = make([]wireStockItem, len(cw.Items))
		for i, it := range cw.Items {
			w.Items[i] = it.wireStockItem
		}
	}
	inv, err := stockRules(w, orderID)
	if err != nil {
		return orderdetail.Inventory{}, err
	}
	var c Check
	if s := c.NonEmpty(Top("status"), cw.Status); cw.Status != nil && s != inv.Status {
		c.Fail("status %q: only a %s answer is cached", s, inv.Status)
	}
	for i, it := range cw.Items {
		if s := c.NonEmpty(Elem("items", i, "status"), it.Status); it.Status != nil && s != inv.Items[i].Status {
			c.Fail("%s %q does not match available %d", Elem("items", i, "status"), s, *inv.Items[i].Available)
		}
	}
	if c.Err() != nil {
		return orderdetail.Inventory{}, c.Err()
	}
	return inv, nil
}

type cachedCoupons struct {
	OrderID *string      `json:"order_id"`
	Items   []wireCoupon `json:"items"`
}

// decodeCachedCoupons checks cached coupons with the live rules; the list
// is "items" in the page, "coupons" on the wire.
func decodeCachedCoupons(payload []byte, orderID string) (orderdetail.Coupons, error) {
	var cw cachedCoupons
	if err := unmarshal(payload, &cw); err != nil {
		return orderdetail.Coupons{}, err
	}
	return couponRules(wireCoupons{OrderID: keyed(cw.OrderID, orderID), Coupons: cw.Items}, orderID)
}

// decodeCachedLogistics checks a cached shipment: its JSON is the wire's
// without the order id.
func decodeCachedLogistics(payload []byte, orderID string) (orderdetail.Logistics, error) {
	var w wireShipment
	if err := unmarshal(payload, &w); err != nil {
		return orderdetail.Logistics{}, err
	}
	w.OrderID = keyed(w.OrderID, orderID)
	return shipmentRules(w, orderID)
}

// keyed is the order id a cached section is about: the one it names, or
// else its key's.
func keyed(named *string, orderID string) *string {
	if named != nil {
		return named
	}
	return &orderID
}
