package downstream

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/orderagg/orderagg/internal/orderdetail"
)

// Dependency names, as passed to Config.WrapTransport and shown in errors.
const (
	DepOrder     = "order"
	DepInventory = "inventory"
	DepCoupon    = "coupon"
	DepLogistics = "logistics"
)

var (
	_ orderdetail.OrderClient     = (*OrderClient)(nil)
	_ orderdetail.InventoryClient = (*InventoryClient)(nil)
	_ orderdetail.CouponClient    = (*CouponClient)(nil)
	_ orderdetail.LogisticsClient = (*LogisticsClient)(nil)
)

// OrderClient calls the order service. It is safe for concurrent use.
type OrderClient struct{ b *base }

// NewOrderClient returns a client of the order service at c.BaseURL.
func NewOrderClient(c Config) (*OrderClient, error) {
	b, err := newBase(DepOrder, c)
	if err != nil {
		return nil, err
	}
	return &OrderClient{b}, nil
}

// GetOrder fetches the order. A 404 wraps orderdetail.ErrNotFound.
func (c *OrderClient) GetOrder(ctx context.Context, orderID string) (orderdetail.Order, error) {
	return fetch(ctx, c.b, orderID, "/order/v1/orders/"+url.PathEscape(orderID), decodeOrder)
}

// Close closes idle connections; calls in flight are not interrupted.
func (c *OrderClient) Close() { c.b.closeIdle() }

// InventoryClient calls the inventory service. It is safe for concurrent use.
type InventoryClient struct{ b *base }

// NewInventoryClient returns a client of the inventory service at c.BaseURL.
func NewInventoryClient(c Config) (*InventoryClient, error) {
	b, err := newBase(DepInventory, c)
	if err != nil {
		return nil, err
	}
	return &InventoryClient{b}, nil
}

// GetInventory fetches the stock of the order's SKUs. The answer's Status is
// CONFIRMED and each item's Status follows StockStatus.
func (c *InventoryClient) GetInventory(ctx context.Context, orderID string) (orderdetail.Inventory, error) {
	return fetch(ctx, c.b, orderID, "/inventory/v1/orders/"+url.PathEscape(orderID)+"/stock", decodeInventory)
}

// Close closes idle connections; calls in flight are not interrupted.
func (c *InventoryClient) Close() { c.b.closeIdle() }

// CouponClient calls the coupon service. It is safe for concurrent use.
type CouponClient struct{ b *base }

// NewCouponClient returns a client of the coupon service at c.BaseURL.
func NewCouponClient(c Config) (*CouponClient, error) {
	b, err := newBase(DepCoupon, c)
	if err != nil {
		return nil, err
	}
	return &CouponClient{b}, nil
}

// GetCoupons fetches the coupons applicable to the order. Items is never
// nil on success.
func (c *CouponClient) GetCoupons(ctx context.Context, orderID string) (orderdetail.Coupons, error) {
	return fetch(ctx, c.b, orderID, "/coupon/v1/orders/"+url.PathEscape(orderID)+"/coupons", decodeCoupons)
}

// Close closes idle connections; calls in flight are not interrupted.
func (c *CouponClient) Close() { c.b.closeIdle() }

// LogisticsClient calls the logistics service. It is safe for concurrent use.
type LogisticsClient struct{ b *base }

// NewLogisticsClient returns a client of the logistics service at c.BaseURL.
func NewLogisticsClient(c Config) (*LogisticsClient, error) {
	b, err := newBase(DepLogistics, c)
	if err != nil {
		return nil, err
	}
	return &LogisticsClient{b}, nil
}

// GetLogistics fetches the order's shipment.
func (c *LogisticsClient) GetLogistics(ctx context.Context, orderID string) (orderdetail.Logistics, error) {
	return fetch(ctx, c.b, orderID, "/logistics/v1/orders/"+url.PathEscape(orderID)+"/shipment", decodeLogistics)
}

// Close closes idle connections; calls in flight are not interrupted.
func (c *LogisticsClient) Close() { c.b.closeIdle() }

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
// ignored) and their endpoints. Use the single constructors where the
// dependencies need different settings, such as pools sized to different
// bulkheads.
func NewClients(c Config, ep Endpoints) (*Clients, error) {
	with := func(u string) Config { c := c; c.BaseURL = u; return c }
	var (
		cl   Clients
		errs [4]error
	)
	cl.Order, errs[0] = NewOrderClient(with(ep.Order))
	cl.Inventory, errs[1] = NewInventoryClient(with(ep.Inventory))
	cl.Coupon, errs[2] = NewCouponClient(with(ep.Coupon))
	cl.Logistics, errs[3] = NewLogisticsClient(with(ep.Logistics))
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
