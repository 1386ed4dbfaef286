package loadtest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/sim"
)

// oldBulkheads are the built-in bulkheads before they were sized from
// --max-inflight (whose default, 1024, has not changed): order 100, the
// other downstreams 50, the cache 100.
func oldBulkheads(d *config.Dependencies) {
	for name, n := range map[string]int{"order": 100, "inventory": 50, "coupon": 50, "logistics": 50, config.NameCache: 100} {
		d.Update(name, func(x *config.Dependency) { x.Bulkhead.MaxConcurrent = n })
	}
}

// delayedShape is issue 17's delayed downstreams: order 50 ms, inventory
// 80 ms, coupon 30 ms, logistics 100 ms, no errors: slow, never sick.
func delayedShape() shape {
	return shape{faults: map[string]sim.Fault{
		sim.ServiceOrder: {LatencyMS: 50}, sim.ServiceInventory: {LatencyMS: 80},
		sim.ServiceCoupon: {LatencyMS: 30}, sim.ServiceLogistics: {LatencyMS: 100},
	}}
}

// callers drives 16, 64 and 256 closed-loop callers at orderagg in front of
// healthy downstreams (5 ms) and delayed ones, with the old built-in
// bulkheads and with the current ones, alternating the two in every cell,
// and reports the share of degraded pages and of 503s. Every downstream
// stays healthy, so any degraded page is orderagg refusing itself.
func callers(ctx context.Context, e *experiment) error {
	counts := []int{16, 64, 256}
	if e.o.given("concurrency") {
		counts = []int{e.o.Concurrency}
	}
	p := e.stepPlan(0, time.Second, 4*time.Second)
	p.Rate = 0 // closed loop by definition
	e.report.Load = fmt.Sprintf("closed loop, %v workers; per step %s warm-up + %s measured, a fresh service and simulator; ids cycle over %d orders; healthy = every service 5 ms, delayed = order 50, inventory 80, coupon 30, logistics 100 ms; no errors anywhere; old = bulkheads order 100, others 50, cache 100 (the previous defaults), new = the defaults (sized from --max-inflight 1024); old and new alternate within each cell",
		counts, p.Warmup, p.Duration, p.IDs)
	e.report.Columns = []string{"downstreams", "callers", "bulkheads", "pages/s", "degraded", "503", "REJECTED sections", "P50 ms", "P99 ms"}
	shapes := []struct {
		name string
		sh   func() shape
	}{{"healthy", func() shape { return uniformShape(profileFast) }}, {"delayed", delayedShape}}
	variants := []struct {
		name string
		edit func(*config.Dependencies)
	}{{"old", oldBulkheads}, {"new", nil}}
	type cell struct{ degraded, unavailable float64 }
	worst := map[string]cell{}
	for _, sh := range shapes {
		for _, n := range counts {
			p.Concurrency = n
			for _, v := range variants {
				st, err := e.up(ctx, sh.sh(), kindOrderagg, v.edit, 0)
				if err != nil {
					return err
				}
				name := fmt.Sprintf("%s, %d callers, %s bulkheads", sh.name, n, v.name)
				s, _ := e.measure(ctx, name, st.url, p, nil)
				st.stop()
				if ctx.Err() != nil {
					return ctx.Err()
				}
				rejected := int64(0)
				for _, reasons := range s.Reasons {
					rejected += reasons["REJECTED"]
				}
				degraded := ratio(float64(s.DegradedPages), float64(s.Requests))
				unavailable := ratio(float64(s.Status["503"]), float64(s.Requests))
				e.row(sh.name, fmt.Sprint(n), v.name, f0(s.RPS), pc(degraded), pc(unavailable), fmt.Sprint(rejected), f1(s.Latency.P50), f1(s.Latency.P99))
				e.step(name, s, map[string]float64{"degraded_share": degraded, "unavailable_share": unavailable, "rejected_sections": float64(rejected)})
				w := worst[v.name]
				worst[v.name] = cell{max(w.degraded, degraded), max(w.unavailable, unavailable)}
			}
		}
	}
	for _, v := range variants {
		e.finding("%s bulkheads: at most %s of pages degraded and %s answered 503 in any cell, every downstream healthy", v.name, pc(worst[v.name].degraded), pc(worst[v.name].unavailable))
	}
	e.note("a degraded page here is never a sick dependency (none fails or stalls): the REJECTED column counts the sections orderagg refused itself; the rest are sub-budgets spent while this process was saturated")
	e.note("the 503 share is admission (--max-inflight 1024) or an order that was neither live nor cached; at these caller counts admission never refuses: %s", strings.Join(admissionLine(counts), ", "))
	return nil
}

// admissionLine says, per caller count, how far it is from --max-inflight.
func admissionLine(counts []int) []string {
	var out []string
	for _, n := range counts {
		out = append(out, fmt.Sprintf("%d callers = %.0f %% of it", n, 100*float64(n)/float64(config.DefaultMaxInflight)))
	}
	return out
}
