package downstream

import (
	"errors"
	"fmt"
)

// The four clients of the page by their types, for the tests that call them
// all against one simulator.
type (
	OrderClient     = Client[Order]
	InventoryClient = Client[Inventory]
	CouponClient    = Client[Coupons]
	LogisticsClient = Client[Logistics]
)

// bundled are the services of Clients, as the simulator names them.
var bundled = []string{"order", "inventory", "coupon", "logistics"}

// Endpoints are the base URLs of the four services.
type Endpoints struct {
	Order, Inventory, Coupon, Logistics string
}

// SameEndpoint is Endpoints with one base URL for all four services, as
// served by `orderagg sim`.
func SameEndpoint(baseURL string) Endpoints {
	return Endpoints{Order: baseURL, Inventory: baseURL, Coupon: baseURL, Logistics: baseURL}
}

// Clients are the four clients, each with its own transport.
type Clients struct {
	Order     *OrderClient
	Inventory *InventoryClient
	Coupon    *CouponClient
	Logistics *LogisticsClient
}

// NewClients builds the four clients from one Config (its BaseURL is
// ignored) and their endpoints. Use NewClient where the dependencies need
// different settings, such as pools sized to different bulkheads.
func NewClients(c Config, ep Endpoints) (*Clients, error) {
	with := func(u string) Config { c := c; c.BaseURL = u; return c }
	var (
		cl   Clients
		errs [4]error
	)
	cl.Order, errs[0] = NewClient("order", orderAPI, with(ep.Order))
	cl.Inventory, errs[1] = NewClient("inventory", inventoryAPI, with(ep.Inventory))
	cl.Coupon, errs[2] = NewClient("coupon", couponAPI, with(ep.Coupon))
	cl.Logistics, errs[3] = NewClient("logistics", logisticsAPI, with(ep.Logistics))
	if err := errors.Join(errs[:]...); err != nil {
		cl.Close()
		return nil, fmt.Errorf("downstream: new clients: %w", err)
	}
	return &cl, nil
}

// Close closes the idle connections of all four clients. It tolerates
// clients that were never built.
func (c *Clients) Close() {
	if c.Order != nil {
		c.Order.Close()
	}
	if c.Inventory != nil {
		c.Inventory.Close()
	}
	if c.Coupon != nil {
		c.Coupon.Close()
	}
	if c.Logistics != nil {
		c.Logistics.Close()
	}
}
