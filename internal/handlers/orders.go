package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/orderdetail"
)

// Pager builds an order-detail page; *orderdetail.Aggregator is one.
type Pager interface {
	Get(ctx context.Context, orderID string) (*orderdetail.Page, error)
}

var validOrderID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// orders serves GET /v1/orders/{id}.
type orders struct{ Options }

func (h *orders) get(c echo.Context) error {
	arrived := time.Now() // the deadline runs from here
	ctx, cancel := context.WithDeadline(c.Request().Context(), arrived.Add(h.Deadline))
	defer cancel()
	status, degraded := http.StatusOK, false
	if h.Record != nil {
		defer func() { h.Record(ctx, status, degraded, time.Since(arrived)) }()
	}
	if !h.Limiter.TryAcquire() {
		if h.Rejected != nil {
			h.Rejected(ctx)
		}
		status = http.StatusServiceUnavailable
		return &APIError{status, CodeOverloaded, "too many requests in flight; retry shortly", 1}
	}
	defer h.Limiter.Release()

	id := c.Param("id")
	if !validOrderID.MatchString(id) {
		status = http.StatusBadRequest
		return &APIError{Status: status, Code: CodeInvalidOrderID, Message: "order id must match " + validOrderID.String()}
	}
	ctx = downstream.WithRequestID(ctx, c.Response().Header().Get(echo.HeaderXRequestID))
	page, err := h.Pager.Get(ctx, id)
	switch {
	case errors.Is(err, orderdetail.ErrOrderNotFound):
		status = http.StatusNotFound
		return &APIError{Status: status, Code: CodeOrderNotFound, Message: "order " + id + " does not exist"}
	case err != nil:
		status = http.StatusServiceUnavailable
		return &APIError{status, CodeOrderUnavailable, "the order service is unavailable and no recent copy of this order is cached", 1}
	}
	body, err := encodePage(page)
	if err != nil {
		status = http.StatusInternalServerError
		return err
	}
	if degraded = page.Degraded; degraded {
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	}
	return c.JSONBlob(http.StatusOK, body)
}

// sectionHead is what every section of the page says before its body.
type sectionHead struct {
	Source   orderdetail.Source `json:"source"`
	Degraded bool               `json:"degraded"`
	Reason   orderdetail.Reason `json:"reason,omitempty"`
	AsOf     time.Time          `json:"as_of,omitzero"`
}

// encodePage is the contract's page document, its keys in a reader's
// order: order_id, degraded, then each section under its name in page
// order, as its sectionHead followed by its body's fields, or by its body
// under BodyKey. The bodies are json.Marshal's output, spliced in as they
// are; a body that is not an object, without a BodyKey, is an error.
func encodePage(p *orderdetail.Page) ([]byte, error) {
	id, _ := json.Marshal(p.OrderID)
	doc := fmt.Appendf(nil, `{"order_id":%s,"degraded":%t`, id, p.Degraded) // open, to add the sections
	for _, s := range p.Sections {
		body, err := s.BodyJSON, error(nil)
		if body == nil {
			body, err = json.Marshal(s.Body)
		}
		if err == nil && s.BodyKey == "" && (len(body) < 2 || body[0] != '{') {
			err = errors.New("the body is not a JSON object")
		}
		if err != nil {
			return nil, fmt.Errorf("encoding section %s: %w", s.Name, err)
		}
		head, _ := json.Marshal(sectionHead{s.Source, s.Degraded, s.Reason, s.AsOf.UTC()})
		doc = appendKey(append(doc, ','), s.Name)
		doc = append(doc, head[:len(head)-1]...) // the head's members, then the body's
		switch {
		case s.BodyKey != "":
			doc = append(appendKey(append(doc, ','), s.BodyKey), body...)
		case len(body) > 2:
			doc = append(append(doc, ','), body[1:len(body)-1]...)
		}
		doc = append(doc, '}')
	}
	return append(doc, '}'), nil
}

func appendKey(b []byte, k string) []byte {
	q, _ := json.Marshal(k)
	return append(append(b, q...), ':')
}
