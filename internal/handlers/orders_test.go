package handlers

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/orderdetail"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValidOrderID(t *testing.T) {
	for id, want := range map[string]bool{
		"o-1001": true, "A_b-9": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "a b": false, "a/b": false, "é": false,
		"a\n": false, "..": false, "a%20": false,
	} {
		if got := validOrderID.MatchString(id); got != want {
			t.Errorf("validOrderID(%q) = %v", id, got)
		}
	}
}

var idSpec = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func FuzzValidOrderID(f *testing.F) {
	for _, s := range []string{"o-1001", "", "nf-1", "a b", strings.Repeat("z", 64), strings.Repeat("z", 65), "\x00", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		want := len(id) >= 1 && len(id) <= 64 && idSpec.MatchString(id)
		if got := validOrderID.MatchString(id); got != want {
			t.Fatalf("validOrderID(%q) = %v, want %v", id, got, want)
		}
	})
}

func TestEncodePage(t *testing.T) {
	asOf := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	avail := 4
	page := &orderdetail.Page{
		OrderID:  "o-1",
		Degraded: true,
		Sections: []orderdetail.Section{
			{Name: "order", Source: orderdetail.SourceLive, BodyKey: "data", Body: downstream.Order{ID: "o-1", Items: []downstream.OrderItem{{SKU: "A", Quantity: 1}}}},
			{Name: "inventory", Source: orderdetail.SourceCache, Degraded: true, Reason: orderdetail.ReasonTimeout, AsOf: asOf,
				Body: downstream.Inventory{Status: "CONFIRMED", Items: []downstream.StockItem{{SKU: "A", Available: &avail, Status: "LOW_STOCK"}}}},
			{Name: "coupons", Source: orderdetail.SourceFallback, Degraded: true, Reason: orderdetail.ReasonShortCircuited, Body: downstream.Coupons{Items: []downstream.Coupon{}}},
			{Name: "logistics", Source: orderdetail.SourceFallback, Degraded: true, Reason: orderdetail.ReasonRejected, Body: downstream.Logistics{Status: downstream.LogisticsUnknown}},
		},
	}
	buf, err := encodePage(page)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"order_id":"o-1","degraded":true,` +
		`"order":{"source":"live","degraded":false,"data":{"id":"o-1","user_id":"","status":"","created_at":"0001-01-01T00:00:00Z","currency":"","total_cents":0,"items":[{"sku":"A","name":"","quantity":1,"unit_price_cents":0}],"shipping_address":{"name":"","line1":"","city":"","postal_code":"","country":""}}},` +
		`"inventory":{"source":"cache","degraded":true,"reason":"TIMEOUT","as_of":"2026-03-01T12:00:00Z","status":"CONFIRMED","items":[{"sku":"A","available":4,"status":"LOW_STOCK"}]},` +
		`"coupons":{"source":"fallback","degraded":true,"reason":"SHORT_CIRCUITED","items":[]},` +
		`"logistics":{"source":"fallback","degraded":true,"reason":"REJECTED","status":"UNKNOWN"}}`
	if string(buf) != want { // the keys in a reader's order
		t.Fatalf("got\n%s\nwant\n%s", buf, want)
	}
}

func BenchmarkEncodePage(b *testing.B) {
	avail := 4
	page := &orderdetail.Page{OrderID: "o-1", Sections: []orderdetail.Section{
		{Name: "order", Source: orderdetail.SourceLive, BodyKey: "data", Body: downstream.Order{ID: "o-1", Items: make([]downstream.OrderItem, 3)}},
		{Name: "inventory", Source: orderdetail.SourceLive, Body: downstream.Inventory{Status: "CONFIRMED", Items: []downstream.StockItem{{SKU: "A", Available: &avail}}}},
		{Name: "coupons", Source: orderdetail.SourceLive, Body: downstream.Coupons{Items: []downstream.Coupon{{Code: "X"}}}},
		{Name: "logistics", Source: orderdetail.SourceLive, Body: downstream.Logistics{Status: "IN_TRANSIT"}},
	}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodePage(page); err != nil {
			b.Fatal(err)
		}
	}
}
