package sim

// ServiceInventory is the inventory service; it answers a Stock.
const ServiceInventory = "inventory"

func init() { register(ServiceInventory, "/inventory/v1/orders/{id}/stock", StockFor) }

// Stock is one level per SKU of the order, in item order.
type Stock struct {
	OrderID string       `json:"order_id"`
	Items   []StockLevel `json:"items"`
}

// StockLevel is the stock of one SKU.
type StockLevel struct {
	SKU       string `json:"sku"`
	Available int    `json:"available"`
}

// StockFor returns the inventory service's answer for id. A SKU's level
// depends on the SKU alone: about 15% are out of stock (0), 25% run low
// (1..5), the rest have 6..250.
func StockFor(id string) Stock {
	s := Stock{OrderID: id, Items: []StockLevel{}}
	for _, it := range OrderFor(id).Items {
		g, avail := gen(ServiceInventory, it.SKU), 0
		switch r := g.IntN(100); {
		case r >= 40:
			avail = between(g, 6, 250)
		case r >= 15:
			avail = between(g, 1, 5)
		}
		s.Items = append(s.Items, StockLevel{SKU: it.SKU, Available: avail})
	}
	return s
}
