package downstream

import (
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// Inventory is the stock of each of the order's SKUs.
type Inventory struct {
	Status string      `json:"status"` // InventoryConfirmed; InventoryUnknown in the default
	Items  []StockItem `json:"items"`
}

// StockItem is one SKU's stock. Available is a pointer so that "we do not
// know" (nil, rendered as null) can never be mistaken for "none left" (0).
type StockItem struct {
	SKU       string `json:"sku"`
	Available *int   `json:"available"`
	Status    string `json:"status"` // StockStatus(*Available); StockUnknown in the default
}

// Inventory and stock statuses.
const (
	InventoryConfirmed = "CONFIRMED"
	InventoryUnknown   = "UNKNOWN"
	StockInStock       = "IN_STOCK"
	StockLow           = "LOW_STOCK" // 1 to LowStockMax left
	StockOutOfStock    = "OUT_OF_STOCK"
	StockUnknown       = "UNKNOWN"
	LowStockMax        = 5
)

// StockStatus is the status of an available count.
func StockStatus(available int) string {
	switch {
	case available <= 0:
		return StockOutOfStock
	case available <= LowStockMax:
		return StockLow
	}
	return StockInStock
}

// unknownInventory, the default: every SKU of the order, its availability
// unknown — never 0, never OUT_OF_STOCK.
func unknownInventory(o Order) Inventory {
	items := make([]StockItem, len(o.Items))
	for i, it := range o.Items {
		items[i] = StockItem{SKU: it.SKU, Status: StockUnknown}
	}
	return Inventory{Status: InventoryUnknown, Items: items}
}

// inventoryAPI: the service answers {"order_id", "items": [{"sku", "available"}]}.
var inventoryAPI = API[Inventory]{
	Path: "/inventory/v1/orders/{id}/stock",
	Decode: Wire(func(w struct {
		Envelope
		Items []StockItem `json:"items"`
	}) Inventory {
		for i, it := range w.Items {
			if it.Available != nil {
				w.Items[i].Status = StockStatus(*it.Available)
			}
		}
		return Inventory{Status: InventoryConfirmed, Items: w.Items}
	}),
	Check: func(inv Inventory, _ string) error {
		var c Check
		c.That(inv.Status == InventoryConfirmed, "status", "is not "+InventoryConfirmed)
		c.That(inv.Items != nil, "items", "is missing")
		seen := make(map[string]bool, len(inv.Items))
		for i, it := range inv.Items {
			c.At(it.SKU != "" && !seen[it.SKU], "items", i, "sku", "is empty or listed twice")
			c.At(it.Available != nil && *it.Available >= 0, "items", i, "available", "is missing or negative")
			c.At(it.Available == nil || it.Status == StockStatus(*it.Available), "items", i, "status", "does not match available")
			seen[it.SKU] = true
		}
		return c.Err()
	},
}

func init() {
	Register(Entry{
		Name: "inventory", Section: "inventory", Place: 1,
		Defaults:    resilience.Config{Timeout: 600 * time.Millisecond},
		CacheMaxAge: 60 * time.Second,
		About:       "secondary: its default is status UNKNOWN, never 0 or OUT_OF_STOCK.",
		Why: map[string]string{
			"timeout":       "useful but optional, so well under the order's budget",
			"cache_max_age": "stock moves fast: an older copy could promise stock that is gone",
		},
		New: SectionOf(inventoryAPI, unknownInventory),
	})
}
