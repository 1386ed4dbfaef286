package sim

import (
	"fmt"
	"time"
)

// ServiceLogistics is the logistics service; it answers a Shipment.
const ServiceLogistics = "logistics"

func init() {
	register(service{ServiceLogistics, "/logistics/v1/orders/{id}/shipment", func(id string) any { return ShipmentFor(id) }})
}

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
	s := Shipment{OrderID: id, Carrier: pick(g, []string{"DHL", "DPD", "UPS", "GLS"}), Events: []ShipmentEvent{}}
	at := o.CreatedAt
	scan := func(where, what string) {
		at = at.Add(time.Duration(between(g, 3*60, 20*60)) * time.Minute)
		s.Events = append(s.Events, ShipmentEvent{At: at, Location: where, Description: what})
	}
	city, eta := o.ShippingAddress.City, 24*time.Hour
	switch o.Status {
	case "PLACED", "PAID":
		s.Status, eta = "PREPARING", 96*time.Hour
	case "SHIPPED":
		s.Status = pick(g, []string{"IN_TRANSIT", "IN_TRANSIT", "OUT_FOR_DELIVERY"})
	default:
		s.Status = "DELIVERED"
	}
	if s.Status != "PREPARING" {
		s.TrackingNumber = fmt.Sprintf("%s%012d", s.Carrier, g.Int64N(1e12))
		scan("Warehouse", "Parcel handed to carrier")
		scan(city, "Arrived at delivery station")
	}
	if s.Status == "OUT_FOR_DELIVERY" || s.Status == "DELIVERED" {
		scan(city, "Out for delivery")
		eta = 2 * time.Hour
	}
	if s.Status == "DELIVERED" {
		scan(city, "Delivered")
		eta = 0
	}
	t := at.Add(eta)
	s.ETA = &t
	return s
}
