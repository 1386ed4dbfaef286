// Package reviews is the worked example of docs/adding-a-dependency.md: a
// fifth downstream, "reviews", described once and registered in the
// order-detail aggregation next to the four that ship with orderagg.
//
// Everything a dependency needs is here, in the shape it takes in the real
// tree:
//
//   - its answer, Reviews, whose JSON names are public (they appear in the
//     page under the "reviews" key);
//   - its client: the Client interface the aggregation calls, an HTTP
//     implementation (HTTPClient) and a function adapter for tests
//     (ClientFunc);
//   - its semantic default, Unknown: "we do not know the reviews", never
//     "there are none";
//   - its settings (DefaultSettings): sub-budget, bulkhead, breaker, retry
//     and last-good maximum age, as a config.Dependency;
//   - NewSection, which builds the orderdetail.Dependency that
//     internal/app/serve.go registers with one orderdetail.NewSection call.
//
// The package compiles and is tested with the rest of the module, so the
// guide cannot describe an API that no longer exists.
package reviews

import (
	"context"
	"time"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Name is the dependency's name: its key in the page's JSON, in the
// --config file, in the admin API and in /v1/resilience, and the value of
// the "dependency" attribute of its metrics.
const Name = "reviews"

// Reviews are the customer reviews of the order's products.
type Reviews struct {
	Items []Review `json:"items"`
	// Average rating of Items, 1 to 5. A pointer, so that "unknown" (nil,
	// rendered as null) can never be mistaken for a rating of 0.
	Average *float64 `json:"average"`
}

// Review is one customer review.
type Review struct {
	SKU    string    `json:"sku"`
	Author string    `json:"author"`
	Rating int       `json:"rating"`
	Text   string    `json:"text"`
	At     time.Time `json:"at"`
}

// Client fetches the reviews of an order's products. Like the aggregation's
// other clients it is keyed by the order id alone, so that every call of a
// page starts at the same instant. Errors follow orderdetail's rules: wrap
// orderdetail.ErrNotFound for a 404, mark the caller's mistakes with
// resilience.BadRequest; anything else counts against the dependency.
type Client interface {
	GetReviews(ctx context.Context, orderID string) (Reviews, error)
}

// ClientFunc adapts a function to Client (fakes in tests).
type ClientFunc func(ctx context.Context, orderID string) (Reviews, error)

// GetReviews calls f.
func (f ClientFunc) GetReviews(ctx context.Context, orderID string) (Reviews, error) {
	return f(ctx, orderID)
}

// Unknown is the semantic default when the reviews service cannot answer and
// no recent copy is cached: no reviews listed and the average unknown
// (null). It must not say "no reviews" with an average of 0: the section's
// source ("fallback") and reason tell the reader it is not an answer.
func Unknown(orderdetail.Order) Reviews {
	return Reviews{Items: []Review{}, Average: nil}
}

// DefaultSettings are the dependency's built-in settings, the entry it gets
// in config.DefaultDependencies. Reviews decorate the page like coupons: a
// small sub-budget (250ms), the usual bulkhead of 50 (Little's law: 250 req/s
// × 100ms tail × 2 headroom) and, since reviews change slowly, a last-good
// copy may be served for up to 10 minutes. Everything else keeps the
// resilience defaults (breaker, one retry, no hedging).
func DefaultSettings() config.Dependency {
	return config.Dependency{
		Config: resilience.Config{
			Timeout:  250 * time.Millisecond,
			Bulkhead: resilience.BulkheadConfig{MaxConcurrent: 50},
		}.WithDefaults(),
		CacheMaxAge: 10 * time.Minute,
	}
}

// NewSection describes the reviews section of the page: this is the one
// call internal/app/serve.go makes to register the dependency, given the
// guard built from its settings and its client.
func NewSection(guard *resilience.Guard, maxAge time.Duration, c Client) orderdetail.Dependency {
	return orderdetail.NewSection(Name, guard, maxAge, c.GetReviews, Unknown)
}
