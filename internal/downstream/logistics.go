package downstream

import (
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// Logistics is the shipment of the order. Only Status is always known: a
// shipment being prepared has no carrier, tracking number or events yet.
type Logistics struct {
	Status         string          `json:"status"` // LogisticsUnknown in the default
	Carrier        string          `json:"carrier,omitempty"`
	TrackingNumber string          `json:"tracking_number,omitempty"`
	ETA            *time.Time      `json:"eta,omitempty"`
	Events         []ShipmentEvent `json:"events,omitempty"`
}

// ShipmentEvent is one scan of the parcel.
type ShipmentEvent struct {
	At          time.Time `json:"at"`
	Location    string    `json:"location"`
	Description string    `json:"description"`
}

// LogisticsUnknown is the default's status: the shipment's state is unknown.
const LogisticsUnknown = "UNKNOWN"

func unknownLogistics(Order) Logistics { return Logistics{Status: LogisticsUnknown} }

// logisticsAPI: the service answers a Logistics with its "order_id".
var logisticsAPI = API[Logistics]{
	Path: "/logistics/v1/orders/{id}/shipment",
	Decode: Wire(func(w struct {
		Envelope
		Logistics
	}) Logistics {
		return w.Logistics
	}),
	Check: func(l Logistics, _ string) error {
		var c Check
		c.That(IsToken(l.Status), "status", "is not an upper-case token")
		c.That(l.ETA == nil || !l.ETA.IsZero(), "eta", "is the zero time")
		for i, e := range l.Events {
			c.At(!e.At.IsZero(), "events", i, "at", "is missing")
			c.At(e.Description != "", "events", i, "description", "is empty")
		}
		return c.Err()
	},
}

func init() {
	Register(Entry{
		Name: "logistics", Section: "logistics", Place: 3,
		Defaults:    resilience.Config{Timeout: 500 * time.Millisecond},
		CacheMaxAge: 30 * time.Minute,
		About:       "shipment status: its default is status UNKNOWN.",
		Why: map[string]string{
			"timeout":       "matters to the customer more than coupons, less than stock",
			"cache_max_age": "status moves with scan events, tens of minutes apart",
		},
		New: SectionOf(logisticsAPI, unknownLogistics),
	})
}
