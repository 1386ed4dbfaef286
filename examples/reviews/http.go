package reviews

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// maxBody caps an answer: a real one is a few KiB.
const maxBody = 1 << 20

// ErrMalformed is a 200 answer that is not the expected JSON: a failure of
// the dependency, like an error status.
var ErrMalformed = errors.New("reviews: malformed response")

// HTTPClient calls the reviews service at BaseURL:
//
//	GET {BaseURL}/reviews/v1/orders/{id}/reviews
//	200 {"order_id":"o-1","reviews":[{"sku":"…","author":"…","rating":4,"text":"…","at":"…"}]}
//
// It classifies errors as internal/downstream's clients do: a 404 is
// orderdetail.ErrNotFound, other 4xx (but 408 and 429) are the caller's
// mistake (resilience.BadRequest, which never opens the breaker), and 5xx,
// 408, 429, transport errors and malformed bodies are failures of the
// dependency. In the real tree this client would live in internal/downstream
// and reuse its shared plumbing (transport, pool, body cap, error bodies);
// it is written out here so the example stands alone.
type HTTPClient struct {
	BaseURL string
	// HTTP is the client to use; nil means http.DefaultClient. In production
	// give each dependency its own transport, so one slow service cannot
	// starve another's connection pool.
	HTTP *http.Client
}

var _ Client = (*HTTPClient)(nil)

type wireReviews struct {
	OrderID *string      `json:"order_id"`
	Reviews []wireReview `json:"reviews"`
}

type wireReview struct {
	SKU    *string    `json:"sku"`
	Author *string    `json:"author"`
	Rating *int       `json:"rating"`
	Text   *string    `json:"text"`
	At     *time.Time `json:"at"`
}

// GetReviews fetches the reviews of the order's products.
func (c *HTTPClient) GetReviews(ctx context.Context, orderID string) (Reviews, error) {
	body, err := c.get(ctx, "/reviews/v1/orders/"+url.PathEscape(orderID)+"/reviews")
	if err != nil {
		return Reviews{}, fmt.Errorf("reviews %s: %w", orderID, err)
	}
	r, err := decode(body, orderID)
	if err != nil {
		return Reviews{}, fmt.Errorf("reviews %s: %w", orderID, err)
	}
	return r, nil
}

func (c *HTTPClient) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+path, nil)
	if err != nil {
		return nil, resilience.BadRequest(err)
	}
	req.Header.Set("Accept", "application/json")
	if dl, ok := ctx.Deadline(); ok {
		// Tell the service how long we will wait, so it can give up too.
		req.Header.Set(downstream.HeaderBudget, strconv.FormatInt(max(0, time.Until(dl).Milliseconds()), 10))
	}
	if id := downstream.RequestIDFrom(ctx); id != "" {
		req.Header.Set(downstream.HeaderRequestID, id)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %v", ctx.Err(), err) // the caller's deadline, not the service's fault
		}
		return nil, fmt.Errorf("transport: %v", err) // kept as text: net's timeouts would pass for the caller's deadline
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		_ = resp.Body.Close()
	}()
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
	case code == http.StatusNotFound:
		return nil, resilience.BadRequest(fmt.Errorf("%w: HTTP 404", orderdetail.ErrNotFound))
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return nil, resilience.BadRequest(fmt.Errorf("HTTP %d", code))
	default:
		return nil, fmt.Errorf("HTTP %d", code)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %v", ctx.Err(), err)
		}
		return nil, fmt.Errorf("reading body: %v", err)
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("%w: body over %d bytes", ErrMalformed, maxBody)
	}
	return body, nil
}

// decode checks the answer field by field: a 200 that is not what the
// service promises is a failure, never a page with made-up values.
func decode(body []byte, orderID string) (Reviews, error) {
	var w wireReviews
	if err := json.Unmarshal(body, &w); err != nil {
		return Reviews{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if w.OrderID == nil || *w.OrderID != orderID {
		return Reviews{}, fmt.Errorf("%w: order_id is not %q", ErrMalformed, orderID)
	}
	if w.Reviews == nil {
		return Reviews{}, fmt.Errorf("%w: reviews is missing", ErrMalformed)
	}
	out := Reviews{Items: make([]Review, 0, len(w.Reviews))}
	sum := 0
	for i, r := range w.Reviews {
		switch {
		case r.SKU == nil || *r.SKU == "":
			return Reviews{}, fmt.Errorf("%w: reviews[%d].sku is missing", ErrMalformed, i)
		case r.Rating == nil || *r.Rating < 1 || *r.Rating > 5:
			return Reviews{}, fmt.Errorf("%w: reviews[%d].rating is not 1 to 5", ErrMalformed, i)
		case r.At == nil || r.At.IsZero():
			return Reviews{}, fmt.Errorf("%w: reviews[%d].at is missing", ErrMalformed, i)
		}
		rv := Review{SKU: *r.SKU, Rating: *r.Rating, At: *r.At}
		if r.Author != nil {
			rv.Author = *r.Author
		}
		if r.Text != nil {
			rv.Text = *r.Text
		}
		out.Items = append(out.Items, rv)
		sum += rv.Rating
	}
	if n := len(out.Items); n > 0 {
		avg := float64(sum) / float64(n)
		out.Average = &avg
	}
	return out, nil
}
