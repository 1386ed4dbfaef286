package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/admission"
	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/orderdetail"
)

// BenchmarkOrderPageEdge serves GET /v1/orders/{id} through the whole public
// router (request id, URL check, recovery, admission, encoding) with a pager
// that answers at once: the edge's own cost per page, an upper bound on what
// any middleware choice can change in real page throughput, where the
// downstream calls dominate.
func BenchmarkOrderPageEdge(b *testing.B) {
	avail := 4
	page := &orderdetail.Page{OrderID: "o-1", Sections: []orderdetail.Section{
		{Name: "order", Source: orderdetail.SourceLive, BodyKey: "data", Body: downstream.Order{ID: "o-1", Items: make([]downstream.OrderItem, 3)}},
		{Name: "inventory", Source: orderdetail.SourceLive, Body: downstream.Inventory{Status: "CONFIRMED", Items: []downstream.StockItem{{SKU: "A", Available: &avail}}}},
		{Name: "coupons", Source: orderdetail.SourceLive, Body: downstream.Coupons{Items: []downstream.Coupon{{Code: "X"}}}},
		{Name: "logistics", Source: orderdetail.SourceLive, Body: downstream.Logistics{Status: "IN_TRANSIT"}},
	}}
	pager := pagerFunc(func(context.Context, string) (*orderdetail.Page, error) { return page, nil })
	h := New(Options{Pager: pager, Deadline: time.Second, Limiter: admission.New(1 << 20), Logger: slog.New(slog.DiscardHandler)})
	for _, tc := range []struct {
		name string
		id   string // the caller's X-Request-Id; empty: the service makes one
	}{{"own-id", ""}, {"caller-id", "3f2a9c1e-77b4-4c1a-9f0e-5d6c7b8a9e01"}} {
		b.Run(tc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/v1/orders/o-1", nil)
			if tc.id != "" {
				req.Header.Set("X-Request-Id", tc.id)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		})
	}
}
