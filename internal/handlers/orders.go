package handlers

import (
	"bytes"
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

// ValidOrderID reports whether id may be looked up: it matches
// ^[A-Za-z0-9_-]{1,64}$.
func ValidOrderID(id string) bool { return orderID.MatchString(id) }

var orderID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

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

// encodePage is the contract's page document, its keys in a reader's
// order: order_id, degraded, then each section under its name in page
// order, holding source, degraded, reason and as_of, then its body's fields
// (or its body under BodyKey, "data" for the order).
func encodePage(p *orderdetail.Page) ([]byte, error) {
	page := object{{"order_id", p.OrderID}, {"degraded", p.Degraded}}
	for _, s := range p.Sections {
		section := object{{"source", s.Source}, {"degraded", s.Degraded}}
		if s.Reason != "" {
			section = append(section, field{"reason", s.Reason})
		}
		if !s.AsOf.IsZero() {
			section = append(section, field{"as_of", s.AsOf.UTC()})
		}
		body, err := bodyFields(s)
		if err != nil {
			return nil, fmt.Errorf("encoding section %s: %w", s.Name, err)
		}
		page = append(page, field{s.Name, append(section, body...)})
	}
	return page.MarshalJSON()
}

// bodyFields are a section's body as fields of the section: the body's own,
// in their order, or the body under BodyKey.
func bodyFields(s orderdetail.Section) (object, error) {
	if s.BodyKey != "" {
		if s.BodyJSON != nil {
			return object{{s.BodyKey, json.RawMessage(s.BodyJSON)}}, nil
		}
		return object{{s.BodyKey, s.Body}}, nil
	}
	raw := s.BodyJSON // a live body, encoded once by the page
	if raw == nil {
		var err error
		if raw, err = json.Marshal(s.Body); err != nil {
			return nil, err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("the body is not a JSON object")
	}
	var fields object
	for dec.More() {
		key, _ := dec.Token() // a string: the decoder has checked raw
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		fields = append(fields, field{key.(string), v})
	}
	return fields, nil
}

// object is a JSON object that keeps its fields in order; encoding/json
// encodes each key and value.
type object []field

type field struct {
	key   string
	value any
}

func (o object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range o {
		k, _ := json.Marshal(f.key)
		v, err := encode(f.value)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// encode is json.Marshal without re-checking what is JSON already.
func encode(v any) ([]byte, error) {
	switch v := v.(type) {
	case object:
		return v.MarshalJSON()
	case json.RawMessage:
		return v, nil
	}
	return json.Marshal(v)
}
