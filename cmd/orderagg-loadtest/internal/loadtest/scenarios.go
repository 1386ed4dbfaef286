package loadtest

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/sim"
)

// slowPath is the shape of the two bulkhead experiments: only inventory is
// slow (the study's 80 ms service with 1 % errors), the others answer in
// 5 ms, so the page's latency is about the dependency under test.
func slowPath() shape {
	return shape{faults: map[string]sim.Fault{
		sim.ServiceOrder: profileFast, sim.ServiceInventory: profileSlow,
		sim.ServiceCoupon: profileFast, sim.ServiceLogistics: profileFast,
	}}
}

// breakerOff keeps a dependency's breaker from ever opening: it never
// sees enough calls in its window to judge. The experiments use it to
// isolate the other mechanisms (sub-budget, bulkhead, retries).
func breakerOff(d *config.Dependencies, name string) {
	d.Update(name, func(x *config.Dependency) { x.Breaker.MinRequests = 1_000_000_000 })
}

// onlyInventoryLimits sizes every bulkhead but inventory's to at least the
// load's concurrency, so that inventory's is the only one that can reject.
func onlyInventoryLimits(d *config.Dependencies, concurrency int) {
	for _, name := range d.Names() {
		if name != "inventory" {
			d.Update(name, func(x *config.Dependency) { x.Bulkhead.MaxConcurrent = max(x.Bulkhead.MaxConcurrent, concurrency) })
		}
	}
}

func bulkheadSweep(ctx context.Context, e *experiment) error {
	sizes := []int{1, 2, 4, 8, 16, 32, 64}
	p := e.stepPlan(80, time.Second, 5*time.Second)
	e.report.Load = fmt.Sprintf("%s; per step %s warm-up + %s measured, a fresh service and simulator; inventory 80 ms with 1 %% errors (no wait queue), order/coupon/logistics 5 ms",
		p.mode(), p.Warmup, p.Duration)
	e.report.Columns = []string{"bulkhead", "pages/s", "inventory live/s", "per slot/s", "live", "rejected", "P50 ms", "P99 ms", "P99 full ms"}
	var xs, live, ideal, perSlot, twelve, p99, p99full []float64
	var ticks []tick
	// linearUpTo is the largest size up to which every size kept ≥ 80 % of
	// the per-slot rate of a single slot.
	linearUpTo, linear, firstSlot := 0, true, 0.0
	for _, size := range sizes {
		st, err := e.up(ctx, slowPath(), kindOrderagg, func(d *config.Dependencies) {
			d.Update("inventory", func(x *config.Dependency) { x.Bulkhead.MaxConcurrent = size })
			onlyInventoryLimits(d, p.Concurrency)
		}, 0)
		if err != nil {
			return err
		}
		s, _ := e.measure(ctx, fmt.Sprintf("bulkhead %d", size), st.url, p, nil)
		st.stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		liveS := perSec(s.Live("inventory"), s)
		slot := liveS / float64(size)
		rejected := ratio(float64(s.Reasons["inventory"]["REJECTED"]), float64(s.Requests))
		e.row(fmt.Sprint(size), f0(s.RPS), f1(liveS), f1(slot), pc(ratio(float64(s.Live("inventory")), float64(s.Requests))),
			pc(rejected), f1(s.Latency.P50), f1(s.Latency.P99), f1(s.LatencyFull.P99))
		e.step(fmt.Sprintf("bulkhead %d", size), s, map[string]float64{"inventory_live_per_s": liveS, "per_slot_per_s": slot, "rejected_ratio": rejected})
		if size == sizes[0] {
			firstSlot = slot
		}
		if linear = linear && slot >= 0.8*firstSlot && slot > 0; linear {
			linearUpTo = size
		}
		x := math.Log2(float64(size))
		xs, live, p99, p99full = append(xs, x), append(live, liveS), append(p99, s.Latency.P99), append(p99full, s.LatencyFull.P99)
		ideal = append(ideal, math.Min(12.5*float64(size), float64(p.Concurrency)*12.5))
		perSlot, twelve = append(perSlot, slot), append(twelve, 12.5)
		ticks = append(ticks, tick{x, fmt.Sprint(size)})
	}
	n := len(live)
	last := ratio(live[n-1], float64(sizes[n-1]))
	if linearUpTo == sizes[n-1] {
		e.finding("live calls grow linearly with the bulkhead across the whole sweep: %.1f calls/s per slot at bulkhead 1, %.1f at %d (ideal 12.5 = 1000 ms ÷ 80 ms; each call took %.0f ms: the simulator's 80 ms plus the wait for a CPU)",
			firstSlot, last, sizes[n-1], 1000/last)
	} else {
		e.finding("live calls grow linearly with the bulkhead (per slot ≥ 80 %% of bulkhead 1's %.1f calls/s; ideal 12.5 = 1000 ms ÷ 80 ms) up to bulkhead %d; beyond it the machine, not the bulkhead, is the limit (%.1f per slot at %d)",
			firstSlot, linearUpTo, last, sizes[n-1])
	}
	e.finding("bulkhead %d → %d: live calls/s %.0f → %.0f (%.2f×), P99 of full pages %.0f → %.0f ms",
		sizes[0], sizes[n-1], live[0], live[n-1], ratio(live[n-1], live[0]), p99full[0], p99full[n-1])
	return e.plot("experiment-bulkhead-sweep.svg", chart{
		Title:  "Bulkhead size on an 80 ms dependency, 80 closed-loop workers",
		XLabel: "inventory bulkhead size (max concurrent calls)",
		XTicks: ticks,
		Panels: []panel{
			{Title: "Inventory calls answered live per second", YLabel: "calls/s", Series: []series{
				{Name: "measured", X: xs, Y: live, Markers: true},
				{Name: "12.5/s per slot (1000 ms ÷ 80 ms)", X: xs, Y: ideal, Dashed: true, Color: "#999"},
			}},
			{Title: "The same per bulkhead slot", YLabel: "calls/s per slot", Series: []series{
				{Name: "measured", X: xs, Y: perSlot, Markers: true},
				{Name: "12.5/s", X: xs, Y: twelve, Dashed: true, Color: "#999"},
			}},
			{Title: "Page latency P99", YLabel: "ms", Series: []series{
				{Name: "full pages (every section live)", X: xs, Y: p99full, Markers: true},
				{Name: "all pages", X: xs, Y: p99, Markers: true},
			}},
		},
	})
}

func hang(ctx context.Context, e *experiment) error {
	p := e.stepPlan(32, time.Second, 5*time.Second)
	e.report.Load = fmt.Sprintf("%s; per step %s warm-up + %s measured, a fresh aggregator and simulator; healthy = the study's shape (order, coupon 5 ms; inventory 80 ms, 1 %% errors; logistics 150 ms with 5 %% stalls to 500 ms); hanging = logistics never answers",
		p.mode(), p.Warmup, p.Duration)
	e.report.Columns = []string{"aggregator", "logistics", "pages/s", "good pages/s", "full pages", "P50 ms", "P99 ms", "answers"}
	hanging := studyShape()
	hanging.faults[sim.ServiceLogistics] = sim.Fault{Hang: true}
	delete(hanging.stalls, sim.ServiceLogistics)
	noBreaker := func(d *config.Dependencies) { breakerOff(d, "logistics") }
	steps := []struct {
		name, state string
		kind        string
		sh          shape
		edit        func(*config.Dependencies)
	}{
		{"floor", "healthy", kindFloor, studyShape(), nil},
		{"floor", "hanging", kindFloor, hanging, nil},
		{"orderagg", "healthy", kindOrderagg, studyShape(), nil},
		{"orderagg", "hanging", kindOrderagg, hanging, nil},
		{"orderagg, breaker off", "hanging", kindOrderagg, hanging, noBreaker},
	}
	good := map[string]float64{}
	for _, sp := range steps {
		st, err := e.up(ctx, sp.sh, sp.kind, sp.edit, 1)
		if err != nil {
			return err
		}
		name := sp.name + ", logistics " + sp.state
		s, _ := e.measure(ctx, name, st.url, p, nil)
		st.stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g := perSec(s.OK(), s)
		good[sp.name+"/"+sp.state] = g
		e.row(sp.name, sp.state, f1(s.RPS), f1(g), pc(ratio(float64(s.OK()-s.DegradedPages), float64(s.Requests))),
			f1(s.Latency.P50), f1(s.Latency.P99), statusMix(s))
		e.step(name, s, map[string]float64{"good_pages_per_s": g})
	}
	e.finding("with logistics hanging the floor serves %.1f good pages/s, %.2f× its healthy %.1f/s: every page waits out the 1500 ms deadline and fails",
		good["floor/hanging"], ratio(good["floor/hanging"], good["floor/healthy"]), good["floor/healthy"])
	e.finding("orderagg serves %.1f good pages/s, %.2f× its healthy %.1f/s: the breaker opens and logistics comes from the last-good cache or its UNKNOWN default (the slowest dependency gone, pages get faster)",
		good["orderagg/hanging"], ratio(good["orderagg/hanging"], good["orderagg/healthy"]), good["orderagg/healthy"])
	e.finding("with the breaker off (sub-budget and bulkhead only) orderagg serves %.1f good pages/s, %.2f× healthy: every page waits logistics' 500 ms sub-budget",
		good["orderagg, breaker off/hanging"], ratio(good["orderagg, breaker off/hanging"], good["orderagg/healthy"]))
	if fl := good["floor/hanging"]; fl > 0 {
		e.finding("hanging, orderagg vs floor: %.0f× the good pages", ratio(good["orderagg/hanging"], fl))
	} else {
		e.finding("hanging, orderagg vs floor: %.1f good pages/s against none", good["orderagg/hanging"])
	}
	return nil
}

// statusMix lists the answers' statuses as shares, most frequent first.
func statusMix(s Summary) string {
	type kv struct {
		k string
		n int64
	}
	var all []kv
	for k, n := range s.Status {
		all = append(all, kv{k, n})
	}
	if s.Errors > 0 {
		all = append(all, kv{"no answer", s.Errors})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].k < all[j].k })
	var parts []string
	for _, x := range all {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", x.k, 100*ratio(float64(x.n), float64(s.Requests))))
	}
	return strings.Join(parts, " ")
}

func retryStorm(ctx context.Context, e *experiment) error {
	p := e.stepPlan(16, time.Second, 5*time.Second)
	sh := studyShape()
	sh.faults[sim.ServiceInventory] = sim.Fault{LatencyMS: 80, ErrorRate: 0.5}
	e.report.Load = fmt.Sprintf("%s; per step %s warm-up + %s measured, a fresh aggregator and simulator; inventory 80 ms failing 50 %% (HTTP 500), the others as in the study; attempts = inventory requests the simulator received ÷ pages requested (warm-up included on both sides)",
		p.mode(), p.Warmup, p.Duration)
	e.report.Columns = []string{"aggregator", "retries", "pages/s", "inventory attempts/request", "inventory live", "P50 ms", "P99 ms"}
	steps := []struct {
		name, retries string
		kind          string
		attempts      int
		edit          func(*config.Dependencies)
	}{
		{"floor", "none", kindFloor, 1, nil},
		{"floor", "naive: 3 attempts, at once", kindFloor, 3, nil},
		{"orderagg", "defaults: 2 attempts, breaker", kindOrderagg, 0, nil},
		{"orderagg", "2 attempts, breaker off", kindOrderagg, 0, func(d *config.Dependencies) {
			breakerOff(d, "inventory")
		}},
		{"orderagg", "3 attempts, breaker off", kindOrderagg, 0, func(d *config.Dependencies) {
			d.Update("inventory", func(x *config.Dependency) { x.Retry.MaxAttempts = 3 })
			breakerOff(d, "inventory")
		}},
	}
	attempts := map[string]float64{}
	for _, sp := range steps {
		st, err := e.up(ctx, sh, sp.kind, sp.edit, sp.attempts)
		if err != nil {
			return err
		}
		name := sp.name + ", " + sp.retries
		before := st.sim.sim.Stats()[sim.ServiceInventory].Requests
		s, rs := e.measure(ctx, name, st.url, p, nil)
		after := st.sim.sim.Stats()[sim.ServiceInventory].Requests
		st.stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a := ratio(float64(after-before), float64(rs.Sent))
		attempts[name] = a
		liveShare := ratio(float64(s.Live("inventory")), float64(s.Requests))
		if sp.kind == kindFloor {
			// The floor has no fallback: a page is good only if every call,
			// inventory's included, succeeded.
			liveShare = ratio(float64(s.OK()), float64(s.Requests))
		}
		e.row(sp.name, sp.retries, f1(s.RPS), f2(a), pc(liveShare), f1(s.Latency.P50), f1(s.Latency.P99))
		e.step(name, s, map[string]float64{"inventory_attempts_per_request": a, "inventory_live_ratio": liveShare})
	}
	naive := attempts["floor, naive: 3 attempts, at once"]
	def := attempts["orderagg, defaults: 2 attempts, breaker"]
	two := attempts["orderagg, 2 attempts, breaker off"]
	three := attempts["orderagg, 3 attempts, breaker off"]
	e.finding("physical attempts per request on the failing dependency: naive 3× retries %.2f (theory 1 + 0.5 + 0.25 = 1.75); orderagg (breaker off) %.2f with 2 attempts and %.2f with 3, retries bounded by max_attempts and the sub-budget",
		naive, two, three)
	e.finding("orderagg's defaults, breaker on: %.2f attempts per request; 50 %% failures sits exactly on the breaker's 50 %% threshold, so whether and when it opens (and short-circuits nearly every call) varies from run to run",
		def)
	return nil
}

func floorCost(ctx context.Context, e *experiment) error {
	p := e.stepPlan(16, time.Second, 4*time.Second)
	// Short alternating rounds rather than one long run each: on a shared
	// machine the noise comes in bursts, and alternation puts both
	// aggregators through the same bursts; the median round is the figure.
	// Nine, as in the other side-by-side scenarios: with five, runs minutes
	// apart gave median CPU ratios from 1.09× to 1.19× for the same code.
	rounds := sideBySideRounds
	e.report.Load = fmt.Sprintf("%s; both aggregators in front of one simulator with zero latency, measured in alternation (A B, B A, A B, …), %d rounds of %s warm-up + %s each", p.mode(), rounds, p.Warmup, p.Duration)
	e.report.Columns = []string{"aggregator", "requests", "req/s", "CPU µs/request", "redis-server µs/request", "P50 ms", "P90 ms", "P99 ms", "P99.9 ms", "max ms"}
	_, aggURL, floorURL, stop, err := e.startPair(ctx, uniformShape(sim.Fault{}))
	if err != nil {
		return err
	}
	defer stop()

	urls := map[string]string{kindOrderagg: aggURL, kindFloor: floorURL}
	t, err := measureFloorRounds(ctx, e, p, urls, rounds)
	if err != nil {
		return err
	}
	agg := t.report(e)
	if err := floorHalfLoad(ctx, e, p, urls, agg.RPS); err != nil {
		return err
	}
	e.report.Load += fmt.Sprintf("; then each alone at half of orderagg's closed-loop throughput, open loop, %s warm-up + %s", p.Warmup, p.Duration)
	return nil
}

// floorTally is what the floor-cost rounds measured of each aggregator
// (kindOrderagg, kindFloor), pooled over the rounds.
type floorTally struct {
	recs        map[string]*recorder
	window, cpu map[string]time.Duration
	redisCPU    map[string]time.Duration // the redis-server child's, during orderagg's rounds
	sent        map[string]int64
	roundRatios []float64 // orderagg ÷ floor throughput, in round order
	// orderagg's CPU per request, Redis included, ÷ the floor's, per round.
	// Issue #17 judges it, as throughput, in the median round: a burst of
	// the shared machine's other work during one round moves the pooled
	// ratio (shown beside it) but not the median.
	cpuRoundRatios []float64
}

// measureFloorRounds runs both aggregators at saturation in alternating
// order, rounds times.
func measureFloorRounds(ctx context.Context, e *experiment, p plan, urls map[string]string, rounds int) (*floorTally, error) {
	t := &floorTally{
		recs:     map[string]*recorder{kindOrderagg: newRecorder(), kindFloor: newRecorder()},
		window:   map[string]time.Duration{},
		cpu:      map[string]time.Duration{},
		redisCPU: map[string]time.Duration{},
		sent:     map[string]int64{},
	}
	for r := range rounds {
		order := []string{kindOrderagg, kindFloor}
		if r%2 == 1 {
			order = []string{kindFloor, kindOrderagg}
		}
		rps, perReq := map[string]float64{}, map[string]float64{}
		for _, kind := range order {
			rec := newRecorder()
			r0, rok0 := pidCPU(e.redisPID)
			sum, st := e.measure(ctx, fmt.Sprintf("round %d %s", r+1, kind), urls[kind], p, rec)
			r1, rok1 := pidCPU(e.redisPID)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			t.recs[kind].mergeFrom(rec)
			t.window[kind] += st.Window
			t.cpu[kind] += st.CPU
			if kind == kindOrderagg && rok0 && rok1 {
				// The floor has no cache; orderagg's lives in the
				// redis-server child, whose CPU is orderagg's cost too.
				t.redisCPU[kind] += r1 - r0
			}
			t.sent[kind] += st.Sent
			rps[kind] = sum.RPS
			used := st.CPU
			if kind == kindOrderagg && rok0 && rok1 {
				used += r1 - r0
			}
			perReq[kind] = ratio(float64(used/time.Microsecond), float64(st.Sent))
		}
		t.roundRatios = append(t.roundRatios, ratio(rps[kindOrderagg], rps[kindFloor]))
		t.cpuRoundRatios = append(t.cpuRoundRatios, ratio(perReq[kindOrderagg], perReq[kindFloor]))
	}
	return t, nil
}

// report writes each aggregator's row and step and the findings at
// saturation, and returns orderagg's pooled summary.
func (t *floorTally) report(e *experiment) Summary {
	sums := map[string]Summary{}
	perReq, redisReq := map[string]float64{}, map[string]float64{}
	for _, kind := range []string{kindOrderagg, kindFloor} {
		sm := t.recs[kind].summary(t.window[kind])
		sums[kind] = sm
		l := sm.Latency
		perReq[kind] = ratio(float64(t.cpu[kind]/time.Microsecond), float64(t.sent[kind]))
		redisReq[kind] = ratio(float64(t.redisCPU[kind]/time.Microsecond), float64(t.sent[kind]))
		redisCell := "—"
		if kind == kindOrderagg && e.redisPID != 0 {
			redisCell = f1(redisReq[kind])
		}
		e.row(kind, fmt.Sprint(sm.Requests), f0(sm.RPS), cpuCell(perReq[kind]), redisCell, f2(l.P50), f2(l.P90), f2(l.P99), f2(l.P999), f2(l.Max))
		e.step(kind, sm, map[string]float64{"cpu_us_per_request": perReq[kind], "redis_server_us_per_request": redisReq[kind]})
	}
	a, f := sums[kindOrderagg], sums[kindFloor]
	r := ratio(a.RPS, f.RPS)
	d := a.Latency.P50 - f.Latency.P50
	med := medianOf(t.roundRatios)
	e.finding("throughput orderagg ÷ floor: median round %.2f× (target ≥ 0.85×: %s); all rounds pooled %.2f×; per round %s", med, verdict(med >= 0.85), r, roundList(t.roundRatios))
	e.finding("P50 orderagg − floor at saturation = %+.2f ms (target ≤ 1 ms: %s); P99 %.2f vs %.2f ms", d, verdict(d <= 1), a.Latency.P99, f.Latency.P99)
	if perReq[kindFloor] > 0 {
		e.finding("CPU per request, the load generator and the simulator's four answers included (the same work for both): orderagg %.0f µs, floor %.0f µs (%.2f×): orderagg spends %.0f µs more per page. On a saturated machine throughput follows CPU per request, so this ratio is the noise-robust form of the first",
			perReq[kindOrderagg], perReq[kindFloor], ratio(perReq[kindOrderagg], perReq[kindFloor]), perReq[kindOrderagg]-perReq[kindFloor])
		if e.redisPID != 0 {
			withRedis := perReq[kindOrderagg] + redisReq[kindOrderagg]
			cpuMed := medianOf(t.cpuRoundRatios)
			e.finding("CPU per request with Redis (this process plus the redis-server child during orderagg's rounds; the floor has no cache): orderagg %.0f + %.1f = %.0f µs; ÷ the floor's: median round %.2f× (target ≤ 1.25×: %s); all rounds pooled %.2f×; per round %s",
				perReq[kindOrderagg], redisReq[kindOrderagg], withRedis, cpuMed, verdict(cpuMed <= 1.25),
				ratio(withRedis, perReq[kindFloor]), roundList(t.cpuRoundRatios))
		}
	}
	return a
}

// floorHalfLoad measures each aggregator alone, open loop, at half of
// orderagg's saturated throughput aggRPS. At saturation a closed loop's
// latency is mostly queueing (Little's law: workers ÷ throughput), so it
// says little about what orderagg adds to one request; half load does.
func floorHalfLoad(ctx context.Context, e *experiment, p plan, urls map[string]string, aggRPS float64) error {
	half := p
	half.Rate = math.Max(1, math.Round(aggRPS/2))
	p50 := map[string]float64{}
	for _, kind := range []string{kindFloor, kindOrderagg} {
		sm, st := e.measure(ctx, "open loop "+kind, urls[kind], half, nil)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l := sm.Latency
		name := fmt.Sprintf("%s, open loop %g req/s", kind, half.Rate)
		e.row(name, fmt.Sprint(sm.Requests), f0(sm.RPS), cpuCell(ratio(float64(st.CPU/time.Microsecond), float64(st.Sent))), "—", f2(l.P50), f2(l.P90), f2(l.P99), f2(l.P999), f2(l.Max))
		e.step(name, sm, nil)
		p50[kind] = l.P50
	}
	hd := p50[kindOrderagg] - p50[kindFloor]
	e.finding("P50 orderagg − floor at %g req/s, open loop (half of orderagg's capacity) = %+.2f ms (target ≤ 1 ms: %s)", half.Rate, hd, verdict(hd <= 1))
	return nil
}

// cpuCell formats CPU µs per request; 0 means it could not be measured.
func cpuCell(us float64) string {
	if us == 0 {
		return "n/a"
	}
	return f0(us)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func outage(ctx context.Context, e *experiment) error {
	o := newOutageRun(e)
	e.report.Load = fmt.Sprintf("open loop, %g req/s to each aggregator at once, both in front of one simulator (every service 5 ms); logistics healthy %s, hanging %s, healthy %s; figures by the second the answer arrived",
		o.rate, o.phase, o.phase, o.phase)
	e.report.Columns = []string{"aggregator", "phase", "good/s", "full pages", "failed", "P50 ms", "P99 ms", "max ms"}
	s, aggURL, floorURL, stop, err := e.startPair(ctx, uniformShape(profileFast))
	if err != nil {
		return err
	}
	defer stop()
	watch := watchBreakers(ctx, aggURL)
	defer watch.stop()
	// Beside them, orderagg with the breaker settings of before (rate
	// window only, fixed 5 s sleep): the "before" of the same run.
	oldURL, stopOld, err := startService(ctx, s.url, e.o.RedisURL, rateWindowOnly)
	if err != nil {
		return err
	}
	defer stopOld()
	watchOld := watchBreakers(ctx, oldURL)
	defer watchOld.stop()

	o.urls = map[string]string{kindOrderagg: aggURL, kindFloor: floorURL, kindOldBreaker: oldURL}
	if err := o.drive(ctx, e, s); err != nil {
		return err
	}
	goodRate := o.tabulate(e)
	o.conclude(e, goodRate, watch, watchOld)
	return o.plot(e)
}

// outageRun is one outage run: logistics healthy, hanging, then healthy
// again, a phase each, under three aggregators (outageKinds) at once.
type outageRun struct {
	phase  time.Duration
	rate   float64
	p      plan
	origin time.Time
	urls   map[string]string    // by kind
	recs   map[string]*recorder // by kind
}

// outageKinds are the aggregators of the run, in the table's order.
var outageKinds = []string{kindOrderagg, kindOldBreaker, kindFloor}

func newOutageRun(e *experiment) *outageRun {
	o := &outageRun{phase: 10 * time.Second, rate: 100.0}
	if e.o.given("duration") {
		o.phase = e.o.Duration
	}
	if e.o.given("rate") && e.o.Rate > 0 {
		o.rate = e.o.Rate
	}
	o.p = plan{Rate: o.rate, Duration: 3 * o.phase, MaxRequests: e.o.MaxRequests, IDs: e.o.IDs, Timeout: e.o.Timeout}
	return o
}

// drive loads every aggregator for the three phases while logistics hangs
// in the second.
func (o *outageRun) drive(ctx context.Context, e *experiment, s *simStack) error {
	o.origin = time.Now()
	o.recs = map[string]*recorder{}
	for _, kind := range outageKinds {
		o.recs[kind] = newRecorder().withTimeline(o.origin)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the outage's schedule; it ends with ctx or after the recovery
		defer wg.Done()
		for i, f := range []sim.Fault{{Hang: true}, profileFast} {
			t := time.NewTimer(time.Until(o.origin.Add(time.Duration(i+1) * o.phase)))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
				_ = s.sim.SetFault(sim.ServiceLogistics, f)
			}
		}
	}()
	for _, kind := range outageKinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := newTarget(o.urls[kind], 1024, false)
			defer t.close()
			var progress func(time.Duration)
			if kind == kindOrderagg && e.tty {
				progress = progressLine(e.stderr, "outage (orderagg): ", o.p, o.recs[kind])
			}
			run(ctx, t, o.p, o.recs[kind], progress)
		}()
	}
	wg.Wait()
	if e.tty {
		fmt.Fprint(e.stderr, "\r\033[K")
	}
	return ctx.Err()
}

// tabulate writes a row per aggregator and phase and returns each
// aggregator's good answers per second, by phase.
func (o *outageRun) tabulate(e *experiment) map[string][]float64 {
	ps := int(o.phase / time.Second)
	phases := []struct {
		name     string
		from, to int
	}{
		{fmt.Sprintf("healthy 0–%ds", ps), 0, ps},
		{fmt.Sprintf("hanging %d–%ds", ps, 2*ps), ps, 2 * ps},
		{fmt.Sprintf("healthy %d–%ds", 2*ps, 3*ps), 2 * ps, 3 * ps},
	}
	goodRate := map[string][]float64{}
	for _, kind := range outageKinds {
		for _, ph := range phases {
			ok, deg, failed, lat := o.recs[kind].phase(ph.from, ph.to)
			secs := float64(ph.to - ph.from)
			good := float64(ok+deg) / secs
			goodRate[kind] = append(goodRate[kind], good)
			e.row(kind, ph.name, f1(good), pc(ratio(float64(ok), float64(ok+deg+failed))), fmt.Sprint(failed), f1(lat.P50), f1(lat.P99), f1(lat.Max))
		}
		e.step(kind, o.recs[kind].summary(3*o.phase), nil)
	}
	return goodRate
}

// conclude states what the hang cost, how soon orderagg noticed it (by
// latency and by each breaker) and how soon full pages returned.
func (o *outageRun) conclude(e *experiment, goodRate map[string][]float64, watch, watchOld *breakerWatch) {
	firstFast, recovered := o.turningPoints()
	e.finding("during the hang orderagg answered %.1f good pages/s (%.0f %% of its healthy rate, logistics degraded), the floor %.1f/s (%.0f %%)",
		goodRate[kindOrderagg][1], 100*ratio(goodRate[kindOrderagg][1], goodRate[kindOrderagg][0]),
		goodRate[kindFloor][1], 100*ratio(goodRate[kindFloor][1], goodRate[kindFloor][0]))
	switch {
	case firstFast < 0:
		e.finding("orderagg's per-second P99 never came back under 100 ms during the hang")
	default:
		e.finding("orderagg's per-second P99 was back under 100 ms in second %d of the hang", firstFast+1)
	}
	outageDetection(e, kindOrderagg, watch, o.recs[kindOrderagg], o.origin, o.phase, o.rate)
	outageDetection(e, kindOldBreaker, watchOld, o.recs[kindOldBreaker], o.origin, o.phase, o.rate)
	switch {
	case recovered < 0:
		e.finding("orderagg's full pages had not returned by the end of the run")
	default:
		e.finding("full pages (≥ 90 %% of a second's answers) returned in second %d after logistics recovered: an open breaker sleeps 500 ms, then one probe closes it", recovered+1)
	}
}

// turningPoints are, in seconds from the phase's start (-1 for never), when
// orderagg's per-second P99 first came back under 100 ms during the hang,
// and when its full pages returned (≥ 90 % of a second's answers) after it.
func (o *outageRun) turningPoints() (firstFast, recovered int) {
	ps := int(o.phase / time.Second)
	firstFast, recovered = -1, -1
	for _, sec := range o.recs[kindOrderagg].summary(3 * o.phase).Timeline {
		if sec.T > ps && sec.T < 2*ps && firstFast < 0 && sec.P99MS < 100 {
			firstFast = sec.T - ps
		}
		total := sec.OK + sec.Degraded + sec.Failed
		if sec.T >= 2*ps && recovered < 0 && total > 0 && float64(sec.OK) >= 0.9*float64(total) {
			recovered = sec.T - 2*ps
		}
	}
	return firstFast, recovered
}

// plot draws orderagg's and the floor's good answers and P99 per second.
func (o *outageRun) plot(e *experiment) error {
	agg := o.recs[kindOrderagg].summary(3 * o.phase).Timeline
	fl := o.recs[kindFloor].summary(3 * o.phase).Timeline
	perSecond := func(tl []Second, f func(Second) float64) (xs, ys []float64) {
		for _, s := range tl {
			xs, ys = append(xs, float64(s.T)+0.5), append(ys, f(s))
		}
		return xs, ys
	}
	ax, aGood := perSecond(agg, func(s Second) float64 { return float64(s.OK + s.Degraded) })
	_, aFull := perSecond(agg, func(s Second) float64 { return float64(s.OK) })
	fx, fGood := perSecond(fl, func(s Second) float64 { return float64(s.OK + s.Degraded) })
	_, aP99 := perSecond(agg, func(s Second) float64 { return s.P99MS })
	_, fP99 := perSecond(fl, func(s Second) float64 { return s.P99MS })
	ps := int(o.phase / time.Second)
	shade := [][2]float64{{float64(ps), float64(2 * ps)}}
	return e.plot("experiment-outage.svg", chart{
		Title:  fmt.Sprintf("Logistics hangs for %s: orderagg vs the bare floor, %g req/s each (open loop)", o.phase, o.rate),
		XLabel: "seconds since start (by the second each answer arrived)",
		Panels: []panel{
			{Title: "Good answers (HTTP 200) per second", YLabel: "answers/s", Shade: shade, ShadeLabel: "logistics hangs", Series: []series{
				{Name: "orderagg: all 200s", X: ax, Y: aGood, Color: palette[0]},
				{Name: "floor: all 200s", X: fx, Y: fGood, Color: palette[2]},
				{Name: "orderagg: full pages (every section live)", X: ax, Y: aFull, Dashed: true, Color: palette[1]},
			}},
			{Title: "Latency P99 per second", YLabel: "ms", Shade: shade, Series: []series{
				{Name: "orderagg", X: ax, Y: aP99, Color: palette[0]},
				{Name: "floor", X: fx, Y: fP99, Color: palette[2]},
			}},
		},
	})
}

// startPair starts a simulator of the given shape with orderagg and the bare
// floor (one attempt per call) both in front of it; stop ends all three.
func (e *experiment) startPair(ctx context.Context, sh shape) (s *simStack, aggURL, floorURL string, stop func(), err error) {
	if s, err = startSim(sh); err != nil {
		return nil, "", "", nil, err
	}
	aggURL, stopAgg, err := startService(ctx, s.url, e.o.RedisURL, nil)
	if err != nil {
		s.stop()
		return nil, "", "", nil, err
	}
	floorURL, stopFloor, err := startFloor(s.url, 1)
	if err != nil {
		stopAgg()
		s.stop()
		return nil, "", "", nil, err
	}
	return s, aggURL, floorURL, func() { stopFloor(); stopAgg(); s.stop() }, nil
}
