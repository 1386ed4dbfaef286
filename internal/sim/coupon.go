package sim

import (
	"fmt"
	"time"
)

// ServiceCoupon is the coupon service; it answers a CouponList.
const ServiceCoupon = "coupon"

func init() { register(ServiceCoupon, "/coupon/v1/orders/{id}/coupons", CouponsFor) }

// CouponList is the coupon service's answer.
type CouponList struct {
	OrderID string   `json:"order_id"`
	Coupons []Coupon `json:"coupons"` // 0..3 distinct, never null
}

// Coupon is one coupon applicable to the order.
type Coupon struct {
	Code          string    `json:"code"`
	Description   string    `json:"description"`
	DiscountCents int64     `json:"discount_cents"` // at most the order's total
	ExpiresAt     time.Time `json:"expires_at"`     // 14..90 days after the order
}

// CouponsFor is the coupon service's answer for id: 5%, 10% or 15% off.
func CouponsFor(id string) CouponList {
	o, g := OrderFor(id), gen(ServiceCoupon, id)
	l := CouponList{OrderID: id, Coupons: []Coupon{}}
	for i := range g.IntN(4) {
		percent := 5 * int64(i+1)
		l.Coupons = append(l.Coupons, Coupon{
			Code:          fmt.Sprintf("SAVE%d-%04X", percent, g.IntN(0x10000)),
			Description:   fmt.Sprintf("%d%% off this order", percent),
			DiscountCents: o.TotalCents * percent / 100,
			ExpiresAt:     o.CreatedAt.AddDate(0, 0, between(g, 14, 90)).Truncate(24 * time.Hour),
		})
	}
	return l
}
