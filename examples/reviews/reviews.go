// Package reviews is the worked example of docs/adding-a-dependency.md: a
// fifth downstream, "reviews", described in the shape it takes in the real
// tree and built the way internal/app/serve.go builds the four that ship
// with orderagg.
//
// A downstream is three pieces of code, each here under the name it would
// have in its package:
//
//   - internal/orderdetail: its answer, Reviews, whose JSON names are public
//     (they appear in the page under the "reviews" key), and its semantic
//     default, Unknown (orderdetail.UnknownReviews in the real tree): "we do
//     not know the reviews", never "there are none";
//   - internal/downstream: API (downstream.ReviewsAPI), the service's path
//     and strict decoders. downstream.NewClient(API, cfg) is the whole HTTP
//     client: transport, pool, body cap, headers and error classification
//     come with it; and Entry, the one entry of the registry's list
//     (internal/downstream/registry.go), with its default settings and the
//     reason for each number.
//
// Everything else — the --reviews-url flag, ORDERAGG_REVIEWS_URL, the
// config file's "reviews:" key, the admin API, the guard, /v1/resilience,
// the metrics' label, the section's place in the page and the client's Close
// — is derived from the registry entry.
//
// The package compiles and is tested with the rest of the module, so the
// guide cannot describe an API that no longer exists.
package reviews

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// ---- internal/orderdetail: the answer and its semantic default ----

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

// Unknown is the semantic default when the reviews service cannot answer and
// no recent copy is cached: no reviews listed and the average unknown
// (null). It must not say "no reviews" with an average of 0: the section's
// source ("fallback") and reason tell the reader it is not an answer.
func Unknown(orderdetail.Order) Reviews {
	return Reviews{Items: []Review{}, Average: nil}
}

// ---- internal/downstream: the API ----

// API is the reviews service's HTTP API:
//
//	GET {base}/reviews/v1/orders/{id}/reviews
//	200 {"order_id":"o-1","reviews":[{"sku","author","rating","text","at"}],"average":4.5}
//
// Its answer has a non-nil Items and, when there are reviews, their Average.
// downstream.NewClient(API, cfg) calls it; the errors are classified by
// internal/downstream like every other client's (a 404 wraps
// orderdetail.ErrNotFound and is the caller's fault, 5xx, 408, 429,
// transport errors and malformed bodies count against the dependency).
var API = downstream.API[Reviews]{
	Name:         "reviews",
	Path:         func(id string) string { return "/reviews/v1/orders/" + url.PathEscape(id) + "/reviews" },
	Decode:       decodeReviews,
	DecodeCached: decodeCachedReviews,
}

// The wire document, as pointers so that a missing or null field can be
// told from a zero one. Unknown fields are ignored; json.Unmarshal rejects
// invalid JSON, trailing data and wrong types.
type wireReviews struct {
	OrderID *string      `json:"order_id"`
	Reviews []wireReview `json:"reviews"`
	Average *float64     `json:"average"`
}

type wireReview struct {
	SKU    *string    `json:"sku"`
	Author *string    `json:"author"`
	Rating *int       `json:"rating"`
	Text   *string    `json:"text"`
	At     *time.Time `json:"at"`
}

// averageTolerance is how far a sent average may be from the ratings' mean:
// the service rounds it to one decimal, so up to half that step (1.75 is
// sent as 1.8), plus float error.
const averageTolerance = 0.05 + 1e-9

// decodeReviews checks the answer for orderID field by field: a 200 that is
// not what the service promises is a failure (downstream.ErrMalformed),
// never a page with invented values. order_id must be the requested id;
// reviews must be a list; each review needs a non-empty sku, an author and
// a text (either may be empty: anonymous, or a rating without words), a
// rating of 1 to 5 and a time. average is optional: when sent it must agree
// with the ratings (and be absent or null when there are none); when not
// sent it is computed.
func decodeReviews(body []byte, orderID string) (Reviews, error) {
	var w wireReviews
	if err := json.Unmarshal(body, &w); err != nil {
		return Reviews{}, fmt.Errorf("%w: %v", downstream.ErrMalformed, err)
	}
	return reviewRules(w, orderID)
}

// decodeCachedReviews checks a last-good payload — Reviews as JSON, the
// page's names, without the order id that is its key — with the rules of a
// live answer: the cache is served as the service's answer.
func decodeCachedReviews(payload []byte, orderID string) (Reviews, error) {
	var cw struct {
		Items   []wireReview `json:"items"`
		Average *float64     `json:"average"`
	}
	if err := json.Unmarshal(payload, &cw); err != nil {
		return Reviews{}, fmt.Errorf("%w: %v", downstream.ErrMalformed, err)
	}
	return reviewRules(wireReviews{OrderID: &orderID, Reviews: cw.Items, Average: cw.Average}, orderID)
}

// reviewRules checks an answer field by field, live or cached.
func reviewRules(w wireReviews, orderID string) (Reviews, error) {
	var c downstream.Check
	c.OrderID(downstream.Top("order_id"), w.OrderID, orderID)
	c.List("reviews", w.Reviews == nil)
	out := Reviews{Items: make([]Review, 0, len(w.Reviews))}
	sum := 0
	for i, r := range w.Reviews {
		rv := Review{
			SKU:    c.NonEmpty(downstream.Elem("reviews", i, "sku"), r.SKU),
			Author: c.Str(downstream.Elem("reviews", i, "author"), r.Author),
			Rating: downstream.Between(&c, downstream.Elem("reviews", i, "rating"), r.Rating, 1, 5),
			Text:   c.Str(downstream.Elem("reviews", i, "text"), r.Text),
			At:     c.Time(downstream.Elem("reviews", i, "at"), r.At),
		}
		out.Items = append(out.Items, rv)
		sum += rv.Rating
	}
	if n := len(out.Items); n > 0 {
		mean := float64(sum) / float64(n)
		switch {
		case w.Average == nil:
			out.Average = &mean
		case math.Abs(*w.Average-mean) > averageTolerance:
			c.Fail("average %g is not the ratings' mean %.2f", *w.Average, mean)
		default:
			out.Average = w.Average // the service's rounding
		}
	} else if w.Average != nil {
		c.Fail("average %g without reviews", *w.Average)
	}
	if c.Err() != nil {
		return Reviews{}, c.Err()
	}
	return out, nil
}

// ---- internal/downstream/registry.go: the entry ----

// Entry is the reviews downstream's entry, exactly as it would be appended
// to the registry's list (internal/downstream/registry.go), after logistics:
// the page shows sections in the list's order.
var Entry = downstream.Entry{
	// No bulkhead: internal/config sizes it from --max-inflight like the
	// others'. The breaker, one retry and no hedging are the resilience
	// defaults, whose reasons internal/config gives.
	Name: "reviews", Section: "reviews",
	Defaults: resilience.Config{
		Timeout: 250 * time.Millisecond,
	},
	CacheMaxAge: 10 * time.Minute,
	About:       "decoration, like coupons: its default is no reviews listed and average null (unknown).",
	Why: map[string]string{
		"timeout":       `a decoration whose "unknown" default is honest: a small sub-budget`,
		"cache_max_age": "reviews change over hours, not seconds",
	},
	New: downstream.SectionOf(API, Unknown),
}
