package loadtest

import (
	"context"
	"fmt"
	"time"

	"github.com/orderagg/orderagg/internal/sim"
)

// coreDown measures the fan-out wasted on pages that can only be 503s: the
// order service is down (hanging, then failing fast in a second step) and
// no order is cached, so every page is refused. Each step has two phases on
// one service: "opening", from the first request until the order's breaker
// has had time to open, and "refused", which is the figure (#16: at most
// 0.3 calls to the other three per refused page). Calls are what the
// simulator received, counted between the phases; CPU is the whole
// process's (load generator, simulator and service) per page sent.
func coreDown(ctx context.Context, e *experiment) error {
	p := e.stepPlan(0, 0, 5*time.Second)
	if p.Rate <= 0 {
		p.Rate = 100 // the rate of the measurement
	}
	opening := 3 * time.Second // ten 1 s order timeouts, with room for a loaded machine
	if e.o.given("warmup") {
		opening = e.o.Warmup
	}
	p.Warmup = 0
	open := p
	open.Duration = opening
	e.report.Load = fmt.Sprintf("%s; per step a fresh service and simulator, inventory/coupon/logistics 5 ms; %s opening phase, then %s measured; ids o-1 … o-%d, no order ever cached; calls = requests the simulator received",
		p.mode(), opening, p.Duration, p.IDs)
	e.report.Columns = []string{"order", "phase", "pages", "refused (503)", "other calls", "per refused page", "order calls", "CPU µs/page", "P50 ms", "P99 ms"}

	others := []string{sim.ServiceInventory, sim.ServiceCoupon, sim.ServiceLogistics}
	steps := []struct {
		name  string
		fault sim.Fault
	}{
		{"hanging", sim.Fault{Hang: true}},
		{"failing (HTTP 500)", sim.Fault{ErrorRate: 1}},
	}
	for _, sp := range steps {
		sh := uniformShape(profileFast)
		sh.faults[sim.ServiceOrder] = sp.fault
		st, err := e.up(ctx, sh, kindOrderagg, nil, 0)
		if err != nil {
			return err
		}
		calls := func() (order, rest int64) {
			stats := st.sim.sim.Stats()
			for _, svc := range others {
				rest += stats[svc].Requests
			}
			return stats[sim.ServiceOrder].Requests, rest
		}
		var perPage float64
		o0, r0 := calls()
		for _, ph := range []struct {
			name string
			p    plan
		}{{"opening", open}, {"refused", p}} {
			s, rs := e.measure(ctx, "order "+sp.name+", "+ph.name, st.url, ph.p, nil)
			if ctx.Err() != nil {
				st.stop()
				return ctx.Err()
			}
			o1, r1 := calls()
			refused := s.Status["503"]
			perPage = ratio(float64(r1-r0), float64(refused))
			// The whole process's CPU: load generator, simulator and service.
			cpu := ratio(float64(rs.CPU/time.Microsecond), float64(rs.Sent))
			e.row(sp.name, ph.name, fmt.Sprint(s.Requests), fmt.Sprint(refused), fmt.Sprint(r1-r0), f2(perPage),
				fmt.Sprint(o1-o0), cpuCell(cpu), f1(s.Latency.P50), f1(s.Latency.P99))
			e.step("order "+sp.name+", "+ph.name, s, map[string]float64{
				"other_calls_per_refused_page": perPage, "order_calls": float64(o1 - o0), "other_calls": float64(r1 - r0),
				"cpu_us_per_request": cpu,
			})
			if s.Requests > 0 && refused < s.Requests {
				e.note("order %s, %s: %d of %d pages were not 503s (%s): the order was served from somewhere",
					sp.name, ph.name, s.Requests-refused, s.Requests, statusMix(s))
			}
			o0, r0 = o1, r1
		}
		st.stop()
		e.finding("order %s, no order cached, once its breaker is open: %.2f calls to inventory, coupon and logistics per refused page (target ≤ 0.3: %s)",
			sp.name, perPage, verdict(perPage <= 0.3))
	}
	return nil
}
