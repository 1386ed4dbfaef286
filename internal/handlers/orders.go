package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/orderdetail"
)

// Pager builds an order-detail page; *orderdetail.Aggregator is one.
type Pager interface {
	Get(ctx context.Context, orderID string) (*orderdetail.Page, error)
}

// ValidOrderID reports whether id may be looked up: it matches
// ^[A-Za-z0-9_-]{1,64}$ (FuzzValidOrderID holds the two equal).
func ValidOrderID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for i := range len(id) {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// orders serves GET /v1/orders/{id}.
type orders struct{ Options }

func (h *orders) get(c echo.Context) error {
	arrived := time.Now()
	// The deadline runs from arrival: whatever happens below, the answer
	// leaves within it.
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
	if !ValidOrderID(id) {
		status = http.StatusBadRequest
		return &APIError{Status: status, Code: CodeInvalidOrderID, Message: "order id must match ^[A-Za-z0-9_-]{1,64}$"}
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
		// No cache between us and the user may keep a partial page.
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	}
	return c.JSONBlob(http.StatusOK, body)
}

// encodePage is the contract's page document: order_id and degraded, then
// one object per section under its name, holding source, degraded, reason
// and as_of beside its body's fields, or beside its body under BodyKey when
// that is set ("data" for the order).
func encodePage(p *orderdetail.Page) ([]byte, error) {
	doc := make(map[string]any, 2+len(p.Sections))
	doc["order_id"], doc["degraded"] = p.OrderID, p.Degraded
	for _, s := range p.Sections {
		section := map[string]any{s.BodyKey: s.Body}
		if s.BodyKey == "" {
			var fields map[string]json.RawMessage
			raw, err := json.Marshal(s.Body)
			if err == nil {
				err = json.Unmarshal(raw, &fields)
			}
			if err != nil {
				return nil, fmt.Errorf("encoding section %s: %w", s.Name, err)
			}
			section = make(map[string]any, len(fields)+4)
			for k, v := range fields {
				section[k] = v
			}
		}
		section["source"], section["degraded"] = s.Source, s.Degraded
		if s.Reason != "" {
			section["reason"] = s.Reason
		}
		if !s.AsOf.IsZero() {
			section["as_of"] = s.AsOf.UTC()
		}
		doc[s.Name] = section
	}
	return json.Marshal(doc)
}
