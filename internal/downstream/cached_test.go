package downstream

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/orderagg/orderagg/internal/sim"
)

// cachedPayload is what the aggregation stores for a live answer: the
// decoded value as JSON.
func cachedPayload[T any](t *testing.T, api API[T], body string) string {
	t.Helper()
	v, err := api.read([]byte(body), "o-1", true)
	if err != nil {
		t.Fatalf("live body rejected: %v", err)
	}
	return string(marshal(t, v))
}

// TestDecodeCachedRoundTrip: every live answer's payload decodes back to
// the same value, for the fixed samples and for the simulator's answers of
// many orders, so a cache of good answers is served whole.
func TestDecodeCachedRoundTrip(t *testing.T) {
	check := func(t *testing.T, name string, decode func([]byte, string) (any, error), cached func([]byte, string) (any, error), body []byte, id string) {
		t.Helper()
		live, err := decode(body, id)
		if err != nil {
			t.Fatalf("%s %s: live body rejected: %v", name, id, err)
		}
		payload := marshal(t, live)
		got, err := cached(payload, id)
		if err != nil {
			t.Fatalf("%s %s: the payload of a live answer is refused: %v\n%s", name, id, err, payload)
		}
		if !reflect.DeepEqual(marshal(t, got), payload) {
			t.Fatalf("%s %s: payload %s decodes to %s", name, id, payload, marshal(t, got))
		}
	}
	type codec struct {
		name           string
		decode, cached func([]byte, string) (any, error)
		sample         string
		sim            func(id string) any
	}
	codecs := []codec{
		{"order", anyOf(live(orderAPI)), anyOf(orderAPI.DecodeCached), okOrder, func(id string) any { return sim.OrderFor(id) }},
		{"inventory", anyOf(live(inventoryAPI)), anyOf(inventoryAPI.DecodeCached), okStock, func(id string) any { return sim.StockFor(id) }},
		{"coupons", anyOf(live(couponAPI)), anyOf(couponAPI.DecodeCached), okCoupons, func(id string) any { return sim.CouponsFor(id) }},
		{"logistics", anyOf(live(logisticsAPI)), anyOf(logisticsAPI.DecodeCached), okShipment, func(id string) any { return sim.ShipmentFor(id) }},
		{"logistics preparing", anyOf(live(logisticsAPI)), anyOf(logisticsAPI.DecodeCached), okPreparing, nil},
	}
	for _, c := range codecs {
		check(t, c.name, c.decode, c.cached, []byte(c.sample), "o-1")
		if c.sim == nil {
			continue
		}
		for i := range 200 {
			id := fmt.Sprintf("o-%d", i)
			check(t, c.name, c.decode, c.cached, marshal(t, c.sim(id)), id)
		}
	}
}

func anyOf[T any](f func([]byte, string) (T, error)) func([]byte, string) (any, error) {
	return func(b []byte, id string) (any, error) { return f(b, id) }
}

// TestDecodeCachedRefusesEdits: a payload edited into something no live
// answer could be is ErrMalformed, by the live rules (shared, so their
// tables in decode_test.go apply too) and by the cached form's own.
func TestDecodeCachedRefusesEdits(t *testing.T) {
	order := cachedPayload(t, orderAPI, okOrder)
	stock := cachedPayload(t, inventoryAPI, okStock)
	coupons := cachedPayload(t, couponAPI, okCoupons)
	shipment := cachedPayload(t, logisticsAPI, okShipment)
	t.Run("order", func(t *testing.T) {
		runDecodeCases(t, orderAPI.DecodeCached, append(commonCases(order),
			decodeCase{"another order's id", mutate(order, `"id":"o-1"`, `"id":"o-2"`), false},
			decodeCase{"total -5", mutate(order, `"total_cents":1998`, `"total_cents":-5`), false},
			decodeCase{"quantity 0", mutate(order, `"quantity":2`, `"quantity":0`), false},
			decodeCase{"status prose", mutate(order, `"PAID"`, `"paid"`), false},
			decodeCase{"currency empty", mutate(order, `"EUR"`, `""`), false},
			decodeCase{"created_at zero", mutate(order, `"2025-03-01T10:00:00Z"`, `"0001-01-01T00:00:00Z"`), false},
		))
	})
	t.Run("inventory", func(t *testing.T) {
		runDecodeCases(t, inventoryAPI.DecodeCached, append(commonCases(stock),
			decodeCase{"available -1", mutate(stock, `"available":3`, `"available":-1`), false},
			decodeCase{"available null", mutate(stock, `"available":3`, `"available":null`), false},
			decodeCase{"status against the count", mutate(stock, `"available":3,"status":"LOW_STOCK"`, `"available":3,"status":"IN_STOCK"`), false},
			decodeCase{"item status missing", mutate(stock, `,"status":"LOW_STOCK"`, ``), false},
			decodeCase{"section UNKNOWN", mutate(stock, `"CONFIRMED"`, `"UNKNOWN"`), false},
			decodeCase{"section status missing", mutate(stock, `"status":"CONFIRMED",`, ``), false},
			decodeCase{"items null", mutate(stock, `"items":[`, `"items":null,"x":[`), false},
			decodeCase{"duplicate sku", mutate(stock, `SKU-1001`, `SKU-1000`), false},
		))
	})
	t.Run("coupons", func(t *testing.T) {
		runDecodeCases(t, couponAPI.DecodeCached, append(commonCases(coupons),
			decodeCase{"discount -5", mutate(coupons, `"discount_cents":100`, `"discount_cents":-5`), false},
			decodeCase{"code empty", mutate(coupons, `"C1"`, `""`), false},
			decodeCase{"items null", mutate(coupons, `"items":[`, `"items":null,"x":[`), false},
			decodeCase{"items empty", `{"items":[]}`, true},
		))
	})
	t.Run("logistics", func(t *testing.T) {
		runDecodeCases(t, logisticsAPI.DecodeCached, append(commonCases(shipment),
			decodeCase{"status prose", mutate(shipment, `"IN_TRANSIT"`, `"in transit"`), false},
			decodeCase{"status missing", mutate(shipment, `"status":"IN_TRANSIT",`, ``), false},
			decodeCase{"event without description", mutate(shipment, `,"description":"Parcel handed to carrier"`, ``), false},
		))
	})
}

// TestAPIsNeedACheck: a client cannot be built for an API whose answers
// nothing would check, or whose path has no place for the id.
func TestAPIsNeedACheck(t *testing.T) {
	api := orderAPI
	api.Check = nil
	if _, err := NewClient("order", api, Config{BaseURL: "http://127.0.0.1:1"}); err == nil {
		t.Fatal("NewClient accepted an API without Check")
	}
	api = orderAPI
	api.Path = "/order/v1/orders"
	if _, err := NewClient("order", api, Config{BaseURL: "http://127.0.0.1:1"}); err == nil {
		t.Fatal("NewClient accepted a path without {id}")
	}
}

// live is api's reader of a service's answers.
func live[T any](api API[T]) func([]byte, string) (T, error) {
	return func(body []byte, id string) (T, error) { return api.read(body, id, true) }
}
