package sim

import (
	"fmt"
	"time"
)

// ServiceLogistics is the logistics service; it answers a Shipment.
const ServiceLogistics = "logistics"

func init() { register(ServiceLogistics, "/logistics/v1/orders/{id}/shipment", ShipmentFor) }

// Shipment is the logistics service's answer.
type Shipment struct {
	OrderID        string          `json:"order_id"`
	Status         string          `json:"status"` // PREPARING, IN_TRANSIT, OUT_FOR_DELIVERY or DELIVERED
	Carrier        string          `json:"carrier"`
	TrackingNumber string          `json:"tracking_number,omitempty"` // none while PREPARING
	ETA            *time.Time      `json:"eta,omitempty"`             // always set; once delivered, when
	Events         []ShipmentEvent `json:"events"`                    // in time order; none while PREPARING
}

// ShipmentEvent is one scan of the parcel.
type ShipmentEvent struct {
	At          time.Time `json:"at"`
	Location    string    `json:"location"`
	Description string    `json:"description"`
}

// ShipmentFor returns the logistics service's answer for id. Its status
// follows the order's: PLACED and PAID are PREPARING, SHIPPED is IN_TRANSIT
// or OUT_FOR_DELIVERY, DELIVERED is DELIVERED.
func ShipmentFor(id string) Shipment {
	o, g := OrderFor(id), gen(ServiceLogistics, id)
	s := Shipment{OrderID: id, Carrier: pick(g, []string{"DHL", "DPD", "UPS", "GLS"}), Status: "DELIVERED", Events: []ShipmentEvent{}}
	switch o.Status {
	case "PLACED", "PAID":
		s.Status = "PREPARING"
	case "SHIPPED":
		s.Status = pick(g, []string{"IN_TRANSIT", "IN_TRANSIT", "OUT_FOR_DELIVERY"})
	}
	scans := map[string]int{"IN_TRANSIT": 2, "OUT_FOR_DELIVERY": 3, "DELIVERED": 4}[s.Status]
	if scans > 0 {
		s.TrackingNumber = fmt.Sprintf("%s%012d", s.Carrier, g.Int64N(1e12))
	}
	at, city := o.CreatedAt, o.ShippingAddress.City
	for i, what := range []string{"Parcel handed to carrier", "Arrived at delivery station", "Out for delivery", "Delivered"}[:scans] {
		at = at.Add(time.Duration(between(g, 3*60, 20*60)) * time.Minute)
		s.Events = append(s.Events, ShipmentEvent{At: at, Location: []string{"Warehouse", city, city, city}[i], Description: what})
	}
	s.ETA = new(at.Add([]time.Duration{96 * time.Hour, 0, 24 * time.Hour, 2 * time.Hour, 0}[scans]))
	return s
}
