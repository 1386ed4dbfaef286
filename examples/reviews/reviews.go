// Package reviews is the worked example of docs/adding-a-dependency.md: a
// fifth downstream, "reviews", in one file, as it would sit in
// internal/downstream/reviews.go. It registers itself through the public
// registration API when imported:
//
//	import _ "github.com/orderagg/orderagg/examples/reviews"
//
// and the service then has a --reviews-url flag, a "reviews:" key in its
// --config file and admin API, a guard in /v1/resilience and the metrics,
// and a "reviews" section in every page, all derived from Entry.
package reviews

import (
	"math"
	"time"

	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Reviews are the customer reviews of the order's products. Its JSON names
// are public: they appear in the page, beside source and degraded.
type Reviews struct {
	Items []Review `json:"items"` // never nil
	// Average rating of Items, 1 to 5; nil (null) when unknown, never 0.
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

// unknown, the default: no reviews listed and the average unknown. Not
// "no reviews, average 0": the section's source (fallback) and reason say
// it is not an answer.
func unknown(downstream.Order) Reviews { return Reviews{Items: []Review{}} }

// API: the service answers {"order_id", "reviews": [Review], "average"};
// an average not sent is computed.
var API = downstream.API[Reviews]{
	Path: "/reviews/v1/orders/{id}/reviews",
	Decode: downstream.Wire(func(w struct {
		downstream.Envelope
		Reviews []Review `json:"reviews"`
		Average *float64 `json:"average"`
	}) Reviews {
		if mean, ok := meanOf(w.Reviews); ok && w.Average == nil {
			w.Average = &mean
		}
		return Reviews{Items: w.Reviews, Average: w.Average}
	}),
	Check: check,
}

// check: a list (maybe empty) of reviews, each with a SKU, a rating of 1
// to 5 and a time; an average exactly when there are reviews, within half
// a rounding step (the service rounds to 0.1) of their mean.
func check(r Reviews, _ string) error {
	var c downstream.Check
	c.That(r.Items != nil, "reviews", "is missing")
	for i, rv := range r.Items {
		c.At(rv.SKU != "", "reviews", i, "sku", "is empty")
		c.At(rv.Rating >= 1 && rv.Rating <= 5, "reviews", i, "rating", "is not 1 to 5")
		c.At(!rv.At.IsZero(), "reviews", i, "at", "is missing")
	}
	mean, ok := meanOf(r.Items)
	c.That(ok == (r.Average != nil), "average", "is not null exactly when there are no reviews")
	c.That(!ok || r.Average == nil || math.Abs(*r.Average-mean) <= 0.05+1e-9, "average", "is not the ratings' mean")
	return c.Err()
}

func meanOf(rs []Review) (float64, bool) {
	sum := 0
	for _, r := range rs {
		sum += r.Rating
	}
	return float64(sum) / float64(max(len(rs), 1)), len(rs) > 0
}

// Entry is the registry's entry for reviews.
var Entry = downstream.Entry{
	Name: "reviews", Section: "reviews", Place: 4, // after logistics
	// No bulkhead: internal/config sizes it from --max-inflight like the
	// others'. The breaker and one retry are the resilience defaults,
	// whose reasons internal/config gives.
	Defaults: resilience.Config{
		Timeout: 250 * time.Millisecond,
	},
	CacheMaxAge: 10 * time.Minute,
	About:       "decoration, like coupons: its default is no reviews listed and average null (unknown).",
	Why: map[string]string{
		"timeout":       `a decoration whose "unknown" default is honest: a small sub-budget`,
		"cache_max_age": "reviews change over hours, not seconds",
	},
	New: downstream.SectionOf(API, unknown),
}

func init() { downstream.Register(Entry) }
