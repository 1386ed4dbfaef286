package sim

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// The wire types below are the simulated services' own JSON documents. They
// are deliberately separate from internal/orderdetail's domain types: the
// clients in internal/downstream decode these documents, and keeping two
// definitions is what lets a test catch a client that misreads the wire.

// Order is the order service's answer.
type Order struct {
	ID              string      `json:"id"`
	UserID          string      `json:"user_id"`
	Status          string      `json:"status"`
	CreatedAt       time.Time   `json:"created_at"`
	Currency        string      `json:"currency"`
	TotalCents      int64       `json:"total_cents"`
	Items           []OrderItem `json:"items"`
	ShippingAddress Address     `json:"shipping_address"`
}

// OrderItem is one line of an order.
type OrderItem struct {
	SKU            string `json:"sku"`
	Name           string `json:"name"`
	Quantity       int    `json:"quantity"`
	UnitPriceCents int64  `json:"unit_price_cents"`
}

// Address is an order's shipping address.
type Address struct {
	Name       string `json:"name"`
	Line1      string `json:"line1"`
	City       string `json:"city"`
	PostalCode string `json:"postal_code"`
	Country    string `json:"country"`
}

// Stock is the inventory service's answer.
type Stock struct {
	OrderID string       `json:"order_id"`
	Items   []StockLevel `json:"items"`
}

// StockLevel is the stock of one SKU.
type StockLevel struct {
	SKU       string `json:"sku"`
	Available int    `json:"available"`
}

// CouponList is the coupon service's answer.
type CouponList struct {
	OrderID string   `json:"order_id"`
	Coupons []Coupon `json:"coupons"`
}

// Coupon is one applicable coupon.
type Coupon struct {
	Code          string    `json:"code"`
	Description   string    `json:"description"`
	DiscountCents int64     `json:"discount_cents"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// Shipment is the logistics service's answer.
type Shipment struct {
	OrderID        string          `json:"order_id"`
	Status         string          `json:"status"`
	Carrier        string          `json:"carrier"`
	TrackingNumber string          `json:"tracking_number,omitempty"`
	ETA            *time.Time      `json:"eta,omitempty"`
	Events         []ShipmentEvent `json:"events"`
}

// ShipmentEvent is one scan of the parcel.
type ShipmentEvent struct {
	At          time.Time `json:"at"`
	Location    string    `json:"location"`
	Description string    `json:"description"`
}

// Shipment statuses the simulator produces.
const (
	ShipmentPreparing      = "PREPARING"
	ShipmentInTransit      = "IN_TRANSIT"
	ShipmentOutForDelivery = "OUT_FOR_DELIVERY"
	ShipmentDelivered      = "DELIVERED"
)

// epoch anchors every generated timestamp, so answers never depend on when
// the simulator runs.
var epoch = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

// Exists reports whether the simulated services know orderID: ids that start
// with "nf-" do not exist.
func Exists(orderID string) bool { return !strings.HasPrefix(orderID, "nf-") }

// stream is a splitmix64 generator seeded from an FNV-1a hash. It is written
// out here rather than taken from math/rand so that the data cannot change
// with the Go release.
type stream struct{ s uint64 }

func newStream(parts ...string) *stream {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return &stream{s: h.Sum64()}
}

func (g *stream) next() uint64 {
	g.s += 0x9e3779b97f4a7c15
	z := g.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a number in [0, n). The modulo bias is irrelevant for fake data.
func (g *stream) intn(n int) int { return int(g.next() % uint64(n)) }

// between returns a number in [lo, hi].
func (g *stream) between(lo, hi int) int { return lo + g.intn(hi-lo+1) }

func pick[T any](g *stream, xs []T) T { return xs[g.intn(len(xs))] }

type country struct {
	code, currency string
	cities         []string
	streets        []string
	warehouse      string
	carriers       []string
	postal         func(g *stream) string
}

var countries = []country{
	{"DE", "EUR", []string{"Berlin", "Hamburg", "Munich", "Cologne", "Leipzig"}, []string{"Lindenallee", "Gartenweg", "Hauptstraße", "Bahnhofstraße"}, "Kassel",
		[]string{"DHL", "DPD", "Hermes"}, func(g *stream) string { return fmt.Sprintf("%05d", g.between(10115, 99998)) }},
	{"NL", "EUR", []string{"Amsterdam", "Rotterdam", "Utrecht", "Eindhoven"}, []string{"Kerkstraat", "Dorpsstraat", "Molenweg", "Stationsplein"}, "Tilburg",
		[]string{"PostNL", "DHL", "GLS"}, func(g *stream) string {
			return fmt.Sprintf("%04d %c%c", g.between(1011, 9999), 'A'+rune(g.intn(26)), 'A'+rune(g.intn(26)))
		}},
	{"FR", "EUR", []string{"Paris", "Lyon", "Lille", "Bordeaux", "Nantes"}, []string{"rue de la Paix", "avenue Victor Hugo", "rue du Moulin", "boulevard Voltaire"}, "Orléans",
		[]string{"Colissimo", "Chronopost", "DPD"}, func(g *stream) string { return fmt.Sprintf("%05d", g.between(1000, 95999)) }},
	{"GB", "GBP", []string{"London", "Manchester", "Bristol", "Leeds"}, []string{"High Street", "Station Road", "Church Lane", "Victoria Road"}, "Milton Keynes",
		[]string{"Royal Mail", "DPD", "Evri"}, func(g *stream) string {
			return fmt.Sprintf("%c%c%d %d%c%c", 'A'+rune(g.intn(26)), 'A'+rune(g.intn(26)), g.between(1, 20), g.between(1, 9), 'A'+rune(g.intn(26)), 'A'+rune(g.intn(26)))
		}},
	{"US", "USD", []string{"Seattle", "Austin", "Denver", "Chicago", "Boston"}, []string{"Main Street", "Oak Avenue", "Maple Drive", "Park Avenue"}, "Louisville",
		[]string{"UPS", "FedEx", "USPS"}, func(g *stream) string { return fmt.Sprintf("%05d", g.between(1001, 99950)) }},
}

var (
	orderStatuses = []string{"PLACED", "PAID", "PAID", "SHIPPED", "SHIPPED", "SHIPPED", "DELIVERED", "DELIVERED"}
	adjectives    = []string{"Classic", "Organic", "Compact", "Wireless", "Vintage", "Ceramic", "Bamboo", "Stainless", "Woollen", "Recycled"}
	nouns         = []string{"Coffee Mug", "Desk Lamp", "Backpack", "Water Bottle", "Notebook", "Headphones", "Tea Towel", "Plant Pot", "Phone Stand", "Scarf"}
	firstNames    = []string{"Anna", "Ben", "Chloé", "David", "Emma", "Finn", "Grace", "Hugo", "Ines", "Jonas", "Kate", "Liam"}
	lastNames     = []string{"Müller", "Smith", "Dubois", "de Vries", "Johnson", "Schmidt", "Martin", "Jansen", "Brown", "Weber"}
)

// OrderFor returns the order the order service answers for orderID. It is
// defined for every id, including the nf- ids the service answers 404 for.
func OrderFor(orderID string) Order {
	g := newStream("order", orderID)
	c := pick(g, countries)
	o := Order{
		ID:        orderID,
		UserID:    fmt.Sprintf("u-%05d", g.between(10000, 99999)),
		Status:    pick(g, orderStatuses),
		CreatedAt: epoch.Add(time.Duration(g.intn(365*24*3600)) * time.Second),
		Currency:  c.currency,
	}
	n := g.between(1, 5)
	seen := make(map[string]bool, n)
	for len(o.Items) < n {
		sku := fmt.Sprintf("SKU-%04d", g.between(1000, 9999))
		if seen[sku] {
			continue
		}
		seen[sku] = true
		it := OrderItem{
			SKU:            sku,
			Name:           pick(g, adjectives) + " " + pick(g, nouns),
			Quantity:       g.between(1, 3),
			UnitPriceCents: int64(g.between(2, 150)*100 - 1),
		}
		o.Items = append(o.Items, it)
		o.TotalCents += int64(it.Quantity) * it.UnitPriceCents
	}
	o.ShippingAddress = Address{
		Name:       pick(g, firstNames) + " " + pick(g, lastNames),
		Line1:      fmt.Sprintf("%d %s", g.between(1, 220), pick(g, c.streets)),
		City:       pick(g, c.cities),
		PostalCode: c.postal(g),
		Country:    c.code,
	}
	return o
}

// StockFor returns the inventory service's answer for orderID: one level per
// SKU of the order, in item order. A SKU's level depends on the SKU alone, as
// a real warehouse's would: about 15% are out of stock and 25% run low (1–5).
func StockFor(orderID string) Stock {
	o := OrderFor(orderID)
	s := Stock{OrderID: orderID, Items: make([]StockLevel, 0, len(o.Items))}
	for _, it := range o.Items {
		g := newStream("stock", it.SKU)
		var avail int
		switch r := g.intn(100); {
		case r < 15:
			avail = 0
		case r < 40:
			avail = g.between(1, 5)
		default:
			avail = g.between(6, 250)
		}
		s.Items = append(s.Items, StockLevel{SKU: it.SKU, Available: avail})
	}
	return s
}

type couponKind struct {
	prefix, description string
	percent             int64 // of the order total, or 0 for a fixed amount
	fixedCents          int64
}

var couponKinds = []couponKind{
	{"WELCOME10", "10% off your first order", 10, 0},
	{"FREESHIP", "Free standard shipping", 0, 495},
	{"SPRING15", "15% off the spring collection", 15, 0},
	{"LOYAL5", "5.00 off for loyal customers", 0, 500},
	{"BUNDLE20", "20% off when buying three or more", 20, 0},
}

// CouponsFor returns the coupon service's answer for orderID: 0–3 distinct
// coupons whose discounts never exceed the order's total and which expire
// 14–90 days after the order was placed.
func CouponsFor(orderID string) CouponList {
	o := OrderFor(orderID)
	g := newStream("coupon", orderID)
	n := g.intn(4)
	l := CouponList{OrderID: orderID, Coupons: make([]Coupon, 0, n)}
	used := make(map[int]bool, n)
	for len(l.Coupons) < n {
		k := g.intn(len(couponKinds))
		if used[k] {
			continue
		}
		used[k] = true
		ck := couponKinds[k]
		d := ck.fixedCents
		if ck.percent > 0 {
			d = o.TotalCents * ck.percent / 100
		}
		d = min(d, o.TotalCents)
		day := o.CreatedAt.Truncate(24 * time.Hour)
		l.Coupons = append(l.Coupons, Coupon{
			Code:          fmt.Sprintf("%s-%04X", ck.prefix, g.intn(0x10000)),
			Description:   ck.description,
			DiscountCents: d,
			ExpiresAt:     day.AddDate(0, 0, g.between(14, 90)).Add(24*time.Hour - time.Second),
		})
	}
	return l
}

// ShipmentFor returns the logistics service's answer for orderID. Its status
// follows the order's: PLACED and PAID orders are PREPARING, SHIPPED ones are
// IN_TRANSIT or OUT_FOR_DELIVERY, DELIVERED ones are DELIVERED. Events are in
// time order, starting hours after the order was placed.
func ShipmentFor(orderID string) Shipment {
	o := OrderFor(orderID)
	g := newStream("logistics", orderID)
	var c country
	for _, cc := range countries {
		if cc.code == o.ShippingAddress.Country {
			c = cc
		}
	}
	s := Shipment{OrderID: orderID, Carrier: pick(g, c.carriers), Events: []ShipmentEvent{}}
	hours := func(lo, hi int) time.Duration { return time.Duration(g.between(lo*60, hi*60)) * time.Minute }
	switch o.Status {
	case "PLACED", "PAID":
		s.Status = ShipmentPreparing
		eta := o.CreatedAt.Add(hours(72, 144)).Truncate(time.Hour)
		s.ETA = &eta
		return s
	case "SHIPPED":
		s.Status = ShipmentInTransit
		if g.intn(3) == 0 {
			s.Status = ShipmentOutForDelivery
		}
	default:
		s.Status = ShipmentDelivered
	}
	s.TrackingNumber = fmt.Sprintf("%s%012d", strings.ToUpper(strings.ReplaceAll(s.Carrier, " ", "")[:2]), g.next()%1_000_000_000_000)
	at := o.CreatedAt.Add(hours(6, 30))
	add := func(loc, desc string) {
		s.Events = append(s.Events, ShipmentEvent{At: at, Location: loc, Description: desc})
		at = at.Add(hours(3, 20))
	}
	dest := o.ShippingAddress.City
	add(c.warehouse, "Parcel handed to carrier")
	add(c.warehouse, "Departed sorting center")
	for range g.intn(2) {
		add(pick(g, c.cities)+" hub", "Arrived at sorting center")
	}
	add(dest, "Arrived at delivery station")
	switch s.Status {
	case ShipmentInTransit:
		eta := at.Add(hours(12, 48)).Truncate(time.Hour)
		s.ETA = &eta
	case ShipmentOutForDelivery:
		add(dest, "Out for delivery")
		eta := at.Truncate(time.Hour).Add(2 * time.Hour)
		s.ETA = &eta
	case ShipmentDelivered:
		add(dest, "Out for delivery")
		delivered := at
		add(dest, "Delivered")
		s.ETA = &delivered
	}
	return s
}
