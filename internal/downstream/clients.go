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

// API describes one downstream's HTTP API: its name, where the answer for
// an order lives and how to read it. A client is an API plus a Config; no
// new type is needed per downstream.
type API[T any] struct {
	// Name of the dependency, as passed to Config.WrapTransport and shown in
	// errors.
	Name string
	// Path returns the answer's path below the base URL for an order id,
	// escaped: "/order/v1/orders/" + url.PathEscape(id).
	Path func(orderID string) string
	// Decode checks and converts a 200 body for orderID. A body that is not
	// what the service promises must fail with ErrMalformed: a page with
	// invented values is worse than a degraded one.
	Decode func(body []byte, orderID string) (T, error)
	// DecodeCached checks and converts a last-good payload for orderID: T
	// as JSON, as the aggregation stores it. It must apply Decode's field
	// rules (share them, do not copy them) and fail with ErrMalformed for
	// anything a live answer could not have been: the store is outside the
	// process, and what it holds is served as the dependency's answer.
	DecodeCached func(payload []byte, orderID string) (T, error)
}

// The four APIs of the order-detail page. decode.go checks every field.
var (
	OrderAPI = API[orderdetail.Order]{
		Name:         DepOrder,
		Path:         func(id string) string { return "/order/v1/orders/" + url.PathEscape(id) },
		Decode:       decodeOrder,
		DecodeCached: decodeCachedOrder,
	}
	// InventoryAPI answers with a CONFIRMED status and per item a Status
	// that follows StockStatus.
	InventoryAPI = API[orderdetail.Inventory]{
		Name:         DepInventory,
		Path:         func(id string) string { return "/inventory/v1/orders/" + url.PathEscape(id) + "/stock" },
		Decode:       decodeInventory,
		DecodeCached: decodeCachedInventory,
	}
	// CouponAPI answers with a non-nil Items.
	CouponAPI = API[orderdetail.Coupons]{
		Name:         DepCoupon,
		Path:         func(id string) string { return "/coupon/v1/orders/" + url.PathEscape(id) + "/coupons" },
		Decode:       decodeCoupons,
		DecodeCached: decodeCachedCoupons,
	}
	LogisticsAPI = API[orderdetail.Logistics]{
		Name:         DepLogistics,
		Path:         func(id string) string { return "/logistics/v1/orders/" + url.PathEscape(id) + "/shipment" },
		Decode:       decodeLogistics,
		DecodeCached: decodeCachedLogistics,
	}
)

// Client calls one downstream API. It is safe for concurrent use.
type Client[T any] struct {
	b   *base
	api API[T]
}

// NewClient returns a client of api at c.BaseURL, with its own transport
// and connection pool.
func NewClient[T any](api API[T], c Config) (*Client[T], error) {
	if api.Name == "" || api.Path == nil || api.Decode == nil || api.DecodeCached == nil {
		return nil, errors.New("downstream: an API needs a name, a path, a decoder and a decoder of its cached answers")
	}
	b, err := newBase(api.Name, c)
	if err != nil {
		return nil, err
	}
	return &Client[T]{b: b, api: api}, nil
}

// Get fetches and decodes the answer for orderID. A 404 wraps
// orderdetail.ErrNotFound; see the package doc for how errors are
// classified.
func (c *Client[T]) Get(ctx context.Context, orderID string) (T, error) {
	var zero T
	if orderID == "" {
		return zero, fmt.Errorf("downstream: %s: %w", c.api.Name, errEmptyID)
	}
	body, err := c.b.get(ctx, c.api.Path(orderID))
	if err == nil {
		var v T
		if v, err = c.api.Decode(body, orderID); err == nil {
			return v, nil
		}
	}
	return zero, fmt.Errorf("downstream: %s %s: %w", c.api.Name, orderID, err)
}

// Close closes idle connections; calls in flight are not interrupted.
func (c *Client[T]) Close() { c.b.closeIdle() }
