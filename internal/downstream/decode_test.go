package downstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/orderagg/orderagg/internal/sim"
)

func marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	okOrder = `{"id":"o-1","user_id":"u-1","status":"PAID","created_at":"2025-03-01T10:00:00Z","currency":"EUR",` +
		`"total_cents":1998,"items":[{"sku":"SKU-1000","name":"Mug","quantity":2,"unit_price_cents":999}],` +
		`"shipping_address":{"name":"A B","line1":"1 Main St","city":"Berlin","postal_code":"10115","country":"DE"}}`
	okStock     = `{"order_id":"o-1","items":[{"sku":"SKU-1000","available":0},{"sku":"SKU-1001","available":3}]}`
	okCoupons   = `{"order_id":"o-1","coupons":[{"code":"C1","description":"d","discount_cents":100,"expires_at":"2025-04-01T00:00:00Z"}]}`
	okShipment  = `{"order_id":"o-1","status":"IN_TRANSIT","carrier":"DHL","tracking_number":"DH1","eta":"2025-03-04T12:00:00Z","events":[{"at":"2025-03-02T08:00:00Z","location":"Kassel","description":"Parcel handed to carrier"}]}`
	okPreparing = `{"order_id":"o-1","status":"PREPARING"}`
)

type decodeCase struct {
	name string
	body string
	ok   bool
}

// mutate replaces old by new in body once, failing loudly if old is absent
// so a table row cannot silently test the valid body.
func mutate(body, old, new string) string {
	if !strings.Contains(body, old) {
		panic("mutate: " + old + " not in body")
	}
	return strings.Replace(body, old, new, 1)
}

// commonCases apply to every decoder: what any body must not be.
func commonCases(valid string) []decodeCase {
	return []decodeCase{
		{"valid", valid, true},
		{"valid with unknown fields", mutate(valid, `{`, `{"new_field":{"x":[1,2]},`), true},
		{"valid with surrounding space", "\n " + valid + " \n", true},
		{"empty", ``, false},
		{"null", `null`, false},
		{"array", `[]`, false},
		{"string", `"o-1"`, false},
		{"empty object", `{}`, false},
		{"truncated", valid[:len(valid)/2], false},
		{"trailing garbage", valid + `x`, false},
		{"two documents", valid + valid, false},
		{"html", `<html><body>502 Bad Gateway</body></html>`, false},
	}
}

func runDecodeCases[T any](t *testing.T, decode func([]byte, string) (T, error), cases []decodeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := decode([]byte(tc.body), "o-1")
			if tc.ok && err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if !tc.ok {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
				var zero T
				if string(marshal(t, v)) != string(marshal(t, zero)) {
					t.Errorf("a rejected body still returned %+v", v)
				}
			}
		})
	}
}

func TestDecodeOrder(t *testing.T) {
	cases := append(commonCases(okOrder),
		decodeCase{"other id", mutate(okOrder, `"id":"o-1"`, `"id":"o-2"`), false},
		decodeCase{"id missing", mutate(okOrder, `"id":"o-1",`, ``), false},
		decodeCase{"id number", mutate(okOrder, `"id":"o-1"`, `"id":1`), false},
		decodeCase{"user_id null", mutate(okOrder, `"user_id":"u-1"`, `"user_id":null`), false},
		decodeCase{"status lower case", mutate(okOrder, `"PAID"`, `"paid"`), false},
		decodeCase{"created_at not RFC 3339", mutate(okOrder, `"2025-03-01T10:00:00Z"`, `"yesterday"`), false},
		decodeCase{"created_at zero", mutate(okOrder, `"2025-03-01T10:00:00Z"`, `"0001-01-01T00:00:00Z"`), false},
		decodeCase{"currency lower", mutate(okOrder, `"EUR"`, `"eur"`), false},
		decodeCase{"total string", mutate(okOrder, `"total_cents":1998`, `"total_cents":"1998"`), false},
		decodeCase{"total fractional", mutate(okOrder, `"total_cents":1998`, `"total_cents":19.98`), false},
		decodeCase{"total negative", mutate(okOrder, `"total_cents":1998`, `"total_cents":-1`), false},
		decodeCase{"items missing", mutate(okOrder, `"items":[{"sku":"SKU-1000","name":"Mug","quantity":2,"unit_price_cents":999}],`, ``), false},
		decodeCase{"items null", mutate(okOrder, `[{"sku":"SKU-1000","name":"Mug","quantity":2,"unit_price_cents":999}]`, `null`), false},
		decodeCase{"items object", mutate(okOrder, `[{"sku":"SKU-1000","name":"Mug","quantity":2,"unit_price_cents":999}]`, `{}`), false},
		decodeCase{"items empty", mutate(okOrder, `[{"sku":"SKU-1000","name":"Mug","quantity":2,"unit_price_cents":999}]`, `[]`), true},
		decodeCase{"item null", mutate(okOrder, `[{"sku":"SKU-1000","name":"Mug","quantity":2,"unit_price_cents":999}]`, `[null]`), false},
		decodeCase{"sku empty", mutate(okOrder, `"SKU-1000"`, `""`), false},
		decodeCase{"quantity zero", mutate(okOrder, `"quantity":2`, `"quantity":0`), false},
		decodeCase{"quantity overflow", mutate(okOrder, `"quantity":2`, `"quantity":1e400`), false},
		// A field whose zero value is valid may be absent (Check).
		decodeCase{"name missing", mutate(okOrder, `"name":"Mug",`, ``), true},
		decodeCase{"address missing", mutate(okOrder, `,"shipping_address":{"name":"A B","line1":"1 Main St","city":"Berlin","postal_code":"10115","country":"DE"}`, ``), false},
		decodeCase{"country empty", mutate(okOrder, `"DE"`, `""`), false},
		decodeCase{"postal code number", mutate(okOrder, `"10115"`, `10115`), false},
	)
	runDecodeCases(t, live(orderAPI), cases)
}

func TestDecodeInventory(t *testing.T) {
	cases := append(commonCases(okStock),
		decodeCase{"other order", mutate(okStock, `"o-1"`, `"o-9"`), false},
		decodeCase{"items missing", `{"order_id":"o-1"}`, false},
		decodeCase{"items empty", `{"order_id":"o-1","items":[]}`, true},
		decodeCase{"available missing", mutate(okStock, `,"available":0`, ``), false},
		decodeCase{"available null", mutate(okStock, `"available":0`, `"available":null`), false},
		decodeCase{"available negative", mutate(okStock, `"available":0`, `"available":-1`), false},
		decodeCase{"available string", mutate(okStock, `"available":3`, `"available":"3"`), false},
		decodeCase{"duplicate sku", mutate(okStock, `SKU-1001`, `SKU-1000`), false},
		decodeCase{"long list", stockList(linearScanMax+4, -1), true},
		decodeCase{"long list, duplicate sku", stockList(linearScanMax+4, linearScanMax+2), false},
		decodeCase{"short list, duplicate last", stockList(linearScanMax, linearScanMax-1), false},
	)
	runDecodeCases(t, live(inventoryAPI), cases)

	inv, err := live(inventoryAPI)([]byte(okStock), "o-1")
	if err != nil {
		t.Fatal(err)
	}
	if inv.Status != InventoryConfirmed || len(inv.Items) != 2 ||
		*inv.Items[0].Available != 0 || inv.Items[0].Status != StockOutOfStock ||
		*inv.Items[1].Available != 3 || inv.Items[1].Status != StockLow {
		t.Errorf("decoded %s", marshal(t, inv))
	}
}

func TestDecodeCoupons(t *testing.T) {
	cases := append(commonCases(okCoupons),
		decodeCase{"other order", mutate(okCoupons, `"o-1"`, `"o-9"`), false},
		decodeCase{"coupons missing", `{"order_id":"o-1"}`, false},
		decodeCase{"coupons null", `{"order_id":"o-1","coupons":null}`, false},
		decodeCase{"code empty", mutate(okCoupons, `"C1"`, `""`), false},
		decodeCase{"discount negative", mutate(okCoupons, `100`, `-100`), false},
		decodeCase{"expires_at missing", mutate(okCoupons, `,"expires_at":"2025-04-01T00:00:00Z"`, ``), false},
	)
	runDecodeCases(t, live(couponAPI), cases)

	c, err := live(couponAPI)([]byte(`{"order_id":"o-1","coupons":[]}`), "o-1")
	if err != nil || c.Items == nil || len(c.Items) != 0 {
		t.Errorf("no coupons decoded as %#v, %v; want an empty, non-nil slice", c.Items, err)
	}
}

func TestDecodeLogistics(t *testing.T) {
	cases := append(commonCases(okShipment),
		decodeCase{"preparing: status only", okPreparing, true},
		decodeCase{"other order", mutate(okShipment, `"o-1"`, `"o-9"`), false},
		decodeCase{"status missing", `{"order_id":"o-1"}`, false},
		decodeCase{"status number", `{"order_id":"o-1","status":3}`, false},
		decodeCase{"status prose", mutate(okShipment, `"IN_TRANSIT"`, `"in transit"`), false},
		decodeCase{"eta not a time", mutate(okShipment, `"2025-03-04T12:00:00Z"`, `"soon"`), false},
		decodeCase{"carrier number", mutate(okShipment, `"DHL"`, `7`), false},
		decodeCase{"event without time", mutate(okShipment, `"at":"2025-03-02T08:00:00Z",`, ``), false},
		decodeCase{"event without description", mutate(okShipment, `,"description":"Parcel handed to carrier"`, ``), false},
		decodeCase{"events object", mutate(okShipment, `"events":[`, `"events":{"x":`), false},
	)
	runDecodeCases(t, live(logisticsAPI), cases)
}

// The fuzz targets check that no input panics and that what is accepted is
// valid: the decoders' rules hold and re-encoding is stable.

func FuzzDecodeOrder(f *testing.F) {
	f.Add([]byte(okOrder), "o-1")
	f.Add([]byte(`{"id":"o-1"}`), "o-1")
	f.Add([]byte(`null`), "x")
	for _, id := range []string{"o-1", "o-2", "x_Y-9"} {
		f.Add(marshal(f, sim.OrderFor(id)), id)
	}
	f.Fuzz(func(t *testing.T, body []byte, id string) {
		o, err := live(orderAPI)(body, id)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if o.ID != id || id == "" || o.UserID == "" || len(o.Currency) != 3 || !IsToken(o.Currency) || o.CreatedAt.IsZero() ||
			o.TotalCents < 0 || o.Items == nil || o.ShippingAddress.Country == "" {
			t.Fatalf("accepted an invalid order %+v", o)
		}
		for _, it := range o.Items {
			if it.SKU == "" || it.Quantity < 1 || it.UnitPriceCents < 0 {
				t.Fatalf("accepted an invalid item %+v", it)
			}
		}
		// The domain type shares the wire format, so its JSON must decode
		// to itself.
		again, err := live(orderAPI)(marshal(t, o), id)
		if err != nil || string(marshal(t, again)) != string(marshal(t, o)) {
			t.Fatalf("re-encoding is unstable: %v", err)
		}
	})
}

func FuzzDecodeInventory(f *testing.F) {
	f.Add([]byte(okStock), "o-1")
	f.Add([]byte(`{"order_id":"o-1","items":[{"sku":"A","available":-1}]}`), "o-1")
	for _, id := range []string{"o-1", "o-3"} {
		f.Add(marshal(f, sim.StockFor(id)), id)
	}
	f.Fuzz(func(t *testing.T, body []byte, id string) {
		inv, err := live(inventoryAPI)(body, id)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if id == "" || inv.Status != InventoryConfirmed || inv.Items == nil {
			t.Fatalf("accepted an invalid inventory %+v", inv)
		}
		seen := map[string]bool{}
		for _, it := range inv.Items {
			if it.SKU == "" || seen[it.SKU] || it.Available == nil || *it.Available < 0 || it.Status != StockStatus(*it.Available) {
				t.Fatalf("accepted an invalid item %+v", it)
			}
			seen[it.SKU] = true
		}
	})
}

func FuzzDecodeCoupons(f *testing.F) {
	f.Add([]byte(okCoupons), "o-1")
	f.Add([]byte(`{"order_id":"o-1","coupons":[]}`), "o-1")
	for _, id := range []string{"o-1", "abc"} {
		f.Add(marshal(f, sim.CouponsFor(id)), id)
	}
	f.Fuzz(func(t *testing.T, body []byte, id string) {
		c, err := live(couponAPI)(body, id)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if id == "" || c.Items == nil {
			t.Fatalf("accepted invalid coupons %+v", c)
		}
		for _, cp := range c.Items {
			if cp.Code == "" || cp.DiscountCents < 0 || cp.ExpiresAt.IsZero() {
				t.Fatalf("accepted an invalid coupon %+v", cp)
			}
		}
	})
}

func FuzzDecodeLogistics(f *testing.F) {
	f.Add([]byte(okShipment), "o-1")
	f.Add([]byte(okPreparing), "o-1")
	for _, id := range []string{"o-1", "o-2", "abc"} {
		f.Add(marshal(f, sim.ShipmentFor(id)), id)
	}
	f.Fuzz(func(t *testing.T, body []byte, id string) {
		l, err := live(logisticsAPI)(body, id)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if id == "" || l.Status == "" || strings.ToUpper(l.Status) != l.Status || (l.ETA != nil && l.ETA.IsZero()) {
			t.Fatalf("accepted an invalid shipment %+v", l)
		}
		for _, e := range l.Events {
			if e.At.IsZero() || e.Description == "" {
				t.Fatalf("accepted an invalid event %+v", e)
			}
		}
	})
}

// stockList is an inventory answer for o-1 with n distinct SKUs, but line
// dup (unless negative) repeats line 0's.
func stockList(n, dup int) string {
	items := make([]string, n)
	for i := range items {
		sku := i
		if i == dup {
			sku = 0
		}
		items[i] = fmt.Sprintf(`{"sku":"SKU-%d","available":1}`, sku)
	}
	return `{"order_id":"o-1","items":[` + strings.Join(items, ",") + `]}`
}

// linearScanMax is a list length around which a duplicate check might
// change its method: duplicates are found on either side of it.
const linearScanMax = 16
