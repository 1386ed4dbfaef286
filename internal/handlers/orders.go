package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/orderagg/orderagg/internal/admission"
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
type orders struct {
	pager    Pager
	deadline time.Duration
	limiter  *admission.Limiter
	record   func(ctx context.Context, status int, degraded bool, d time.Duration)
	rejected func(ctx context.Context)
}

func (h *orders) get(c echo.Context) error {
	arrived := time.Now()
	// The deadline runs from arrival, so whatever happens below, the answer
	// leaves within it.
	ctx, cancel := context.WithDeadline(c.Request().Context(), arrived.Add(h.deadline))
	defer cancel()
	status, degraded := http.StatusOK, false
	defer func() { h.record(ctx, status, degraded, time.Since(arrived)) }()

	if !h.limiter.TryAcquire() {
		h.rejected(ctx)
		status = http.StatusServiceUnavailable
		return &APIError{Status: status, Code: CodeOverloaded, Message: "too many requests in flight; retry shortly", RetryAfter: 1}
	}
	defer h.limiter.Release()

	id := c.Param("id")
	if !ValidOrderID(id) {
		status = http.StatusBadRequest
		return &APIError{Status: status, Code: CodeInvalidOrderID, Message: "order id must match ^[A-Za-z0-9_-]{1,64}$"}
	}
	ctx = downstream.WithRequestID(ctx, c.Response().Header().Get(echo.HeaderXRequestID))

	page, err := h.pager.Get(ctx, id)
	switch {
	case errors.Is(err, orderdetail.ErrOrderNotFound):
		status = http.StatusNotFound
		return &APIError{Status: status, Code: CodeOrderNotFound, Message: "order " + id + " does not exist"}
	case err != nil:
		status = http.StatusServiceUnavailable
		return &APIError{Status: status, Code: CodeOrderUnavailable, Message: "the order service is unavailable and no recent copy of this order is cached", RetryAfter: 1}
	}
	body, err := encodePage(page)
	if err != nil {
		status = http.StatusInternalServerError
		return err
	}
	degraded = page.Degraded
	if degraded {
		// A partial page must not be kept by any cache between us and the user.
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	}
	return c.JSONBlob(http.StatusOK, body)
}

// sectionHead is what every section of a page carries.
type sectionHead struct {
	Source   orderdetail.Source `json:"source"`
	Degraded bool               `json:"degraded"`
	Reason   orderdetail.Reason `json:"reason,omitempty"`
	AsOf     *time.Time         `json:"as_of,omitempty"`
}

// encodePage is the contract's page document: order_id and degraded, then
// one object per section under its name, in page order. A section holds its
// sectionHead, then its body's fields, or its body under BodyKey when that
// is set ("data" for the order).
func encodePage(p *orderdetail.Page) ([]byte, error) {
	top, err := json.Marshal(struct {
		OrderID  string `json:"order_id"`
		Degraded bool   `json:"degraded"`
	}{p.OrderID, p.Degraded})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Write(top[:len(top)-1]) // without its closing brace
	for _, s := range p.Sections {
		head := sectionHead{Source: s.Source, Degraded: s.Degraded, Reason: s.Reason}
		if !s.AsOf.IsZero() {
			asOf := s.AsOf.UTC()
			head.AsOf = &asOf
		}
		var body any = s.Body
		if s.BodyKey != "" {
			body = map[string]any{s.BodyKey: s.Body}
		}
		name, nerr := json.Marshal(s.Name)
		h, herr := json.Marshal(head)
		b, berr := json.Marshal(body)
		if err := errors.Join(nerr, herr, berr); err != nil {
			return nil, fmt.Errorf("encoding section %s: %w", s.Name, err)
		}
		buf.WriteByte(',')
		buf.Write(name)
		buf.WriteByte(':')
		buf.Write(joinObjects(h, b))
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// joinObjects returns the JSON object with a's members, then b's; a and b
// are objects as json.Marshal writes them.
func joinObjects(a, b []byte) []byte {
	if len(b) <= 2 { // {}
		return a
	}
	return append(append(a[:len(a)-1], ','), b[1:]...)
}
