package loadtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orderagg/orderagg/internal/sim"
)

// The last-good cache's two experiments (issue #17 items 2 and 3): the
// embedded cache against redis-server, and a page with one dependency's
// breaker open against a healthy one. Both measure two orderagg instances
// in alternating rounds (A B, B A, A B, …) of one run, so that the
// machine's bursts of noise fall on both; the median round is the figure.

// contender is one of the two things a side-by-side scenario compares.
type contender struct {
	name, url string
	redisCPU  bool // count the redis-server child's CPU with this one's
}

// sideBySide is what alternate measured for each contender, pooled over
// the rounds.
type sideBySide struct {
	sums     map[string]Summary
	cpuUS    map[string]float64 // this process per request: load, simulator, orderagg (and an embedded cache)
	redisUS  map[string]float64 // the redis-server child per request
	perRound []float64          // second ÷ first pages/s, round by round
	median   float64
}

// alternate measures a and b in rounds of alternating order. idsFor gives
// each measured step its ids (its plan is a copy).
func (e *experiment) alternate(ctx context.Context, p plan, rounds int, a, b contender, idsFor func(step int, p *plan)) (sideBySide, error) {
	out := sideBySide{sums: map[string]Summary{}, cpuUS: map[string]float64{}, redisUS: map[string]float64{}}
	recs := map[string]*recorder{a.name: newRecorder(), b.name: newRecorder()}
	window := map[string]time.Duration{}
	cpu, rcpu := map[string]time.Duration{}, map[string]time.Duration{}
	sent := map[string]int64{}
	step := 0
	for r := range rounds {
		order := []contender{a, b}
		if r%2 == 1 {
			order = []contender{b, a}
		}
		rps := map[string]float64{}
		for _, c := range order {
			sp := p
			if idsFor != nil {
				idsFor(step, &sp)
			}
			step++
			r0, rok0 := pidCPU(e.redisPID)
			rec := newRecorder()
			sum, st := e.measure(ctx, fmt.Sprintf("round %d %s", r+1, c.name), c.url, sp, rec)
			r1, rok1 := pidCPU(e.redisPID)
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			recs[c.name].mergeFrom(rec)
			window[c.name] += st.Window
			cpu[c.name] += st.CPU
			if c.redisCPU && rok0 && rok1 {
				rcpu[c.name] += r1 - r0
			}
			sent[c.name] += st.Sent
			rps[c.name] = sum.RPS
		}
		out.perRound = append(out.perRound, ratio(rps[b.name], rps[a.name]))
	}
	for _, c := range []contender{a, b} {
		out.sums[c.name] = recs[c.name].summary(window[c.name])
		out.cpuUS[c.name] = ratio(float64(cpu[c.name]/time.Microsecond), float64(sent[c.name]))
		out.redisUS[c.name] = ratio(float64(rcpu[c.name]/time.Microsecond), float64(sent[c.name]))
	}
	out.median = medianOf(out.perRound)
	return out, nil
}

// medianOf is the median round's value of per-round ratios (the upper
// middle one for an even count), leaving v in round order.
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func roundList(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, f2(x))
	}
	return strings.Join(s, ", ")
}

// freshIDs gives every step orders that no earlier step has seen (unless
// --ids was given): each page then writes every live section, as with
// random ids from a large space, which is the cache's heaviest load.
func (e *experiment) freshIDs(step int, p *plan) {
	if e.o.given("ids") {
		return
	}
	p.IDs = 1 << 40
	p.IDOffset = uint64(step+1) * 1_000_000_000
}

// sideBySideRounds: with 4 s rounds on a shared 2-core machine single
// rounds swing by ±30 %; nine make the median steady.
const sideBySideRounds = 9

func embeddedVsRedis(ctx context.Context, e *experiment) error {
	if e.o.RedisURL == "" {
		return fmt.Errorf("needs a Redis to compare with: redis-server on PATH or --redis-url")
	}
	p := e.stepPlan(16, time.Second, 4*time.Second)
	rounds := sideBySideRounds
	ids := "every page a new order (each round its own ids), so each page writes its four sections"
	if e.o.given("ids") {
		ids = fmt.Sprintf("ids o-1…o-%d", e.o.IDs)
	}
	e.report.Load = fmt.Sprintf("%s; two orderagg instances in front of one simulator with zero latency, one with the embedded cache (no --redis-url), one with the Redis above, measured in alternation, %d rounds of %s warm-up + %s each; %s",
		p.mode(), rounds, p.Warmup, p.Duration, ids)
	e.report.Columns = []string{"cache", "requests", "pages/s", "CPU µs/page", "redis-server µs/page", "P50 ms", "P99 ms"}
	s, err := startSim(uniformShape(sim.Fault{}))
	if err != nil {
		return err
	}
	defer s.stop()
	embURL, stopEmb, err := startService(ctx, s.url, "", nil)
	if err != nil {
		return err
	}
	defer stopEmb()
	redisURL, stopRedis, err := startService(ctx, s.url, e.o.RedisURL, nil)
	if err != nil {
		return err
	}
	defer stopRedis()

	emb := contender{name: "embedded", url: embURL}
	red := contender{name: "redis-server", url: redisURL, redisCPU: true}
	res, err := e.alternate(ctx, p, rounds, red, emb, e.freshIDs)
	if err != nil {
		return err
	}
	for _, c := range []contender{emb, red} {
		sm := res.sums[c.name]
		rc := "-"
		if c.redisCPU {
			rc = cpuCell(res.redisUS[c.name])
		}
		e.row(c.name, fmt.Sprint(sm.Requests), f0(sm.RPS), cpuCell(res.cpuUS[c.name]), rc, f2(sm.Latency.P50), f2(sm.Latency.P99))
		e.step(c.name, sm, map[string]float64{"cpu_us_per_request": res.cpuUS[c.name], "redis_server_us_per_request": res.redisUS[c.name]})
	}
	pooled := ratio(res.sums[emb.name].RPS, res.sums[red.name].RPS)
	e.finding("pages/s embedded ÷ redis-server: median round %.2f× (target ≥ 0.80×: %s); all rounds pooled %.2f×; per round %s",
		res.median, verdict(res.median >= 0.8), pooled, roundList(res.perRound))
	if e.redisPID != 0 {
		withRedis := res.cpuUS[red.name] + res.redisUS[red.name]
		e.finding("CPU per page, the load generator and simulator included: embedded %.0f µs (its cache inside), redis-server %.0f µs here + %.0f µs in redis-server = %.0f µs (embedded ÷ that %.2f×)",
			res.cpuUS[emb.name], res.cpuUS[red.name], res.redisUS[red.name], withRedis, ratio(res.cpuUS[emb.name], withRedis))
	}
	return nil
}

func hangCost(ctx context.Context, e *experiment) error {
	p := e.stepPlan(16, time.Second, 4*time.Second)
	rounds := sideBySideRounds
	e.report.Load = fmt.Sprintf("%s; two orderagg instances, each in front of its own zero-latency simulator, one healthy, one with logistics hanging (its breaker open; primed with every id's sections first, as a cache is when a dependency starts to hang), measured in alternation, %d rounds of %s warm-up + %s each; ids o-1…o-%d",
		p.mode(), rounds, p.Warmup, p.Duration, p.IDs)
	e.report.Columns = []string{"logistics", "requests", "pages/s", "CPU µs/page", "redis-server µs/page", "P50 ms", "P99 ms", "logistics live/cache/fallback", "short-circuited"}

	healthySim, err := startSim(uniformShape(sim.Fault{}))
	if err != nil {
		return err
	}
	defer healthySim.stop()
	hungSim, err := startSim(uniformShape(sim.Fault{}))
	if err != nil {
		return err
	}
	defer hungSim.stop()
	// Each instance its own database of one redis-server, so neither reads
	// what the other wrote.
	healthyURL, stopHealthy, err := startService(ctx, healthySim.url, redisDB(e, 1), nil)
	if err != nil {
		return err
	}
	defer stopHealthy()
	hungURL, stopHung, err := startService(ctx, hungSim.url, redisDB(e, 2), nil)
	if err != nil {
		return err
	}
	defer stopHung()

	// Prime the hanging one's cache while logistics still answers, then
	// hang it and give the breaker time to open.
	prime := p
	prime.Warmup, prime.Duration = 0, 3*time.Second
	if e.o.given("duration") {
		prime.Duration = p.Duration // tests shorten everything
	}
	e.measure(ctx, "priming", hungURL, prime, nil)
	if err := hungSim.sim.SetFault(sim.ServiceLogistics, sim.Fault{Hang: true}); err != nil {
		return err
	}
	e.measure(ctx, "opening the breaker", hungURL, prime, nil)
	if ctx.Err() != nil {
		return ctx.Err()
	}

	healthy := contender{name: "healthy", url: healthyURL, redisCPU: true}
	hung := contender{name: "hanging", url: hungURL, redisCPU: true}
	res, err := e.alternate(ctx, p, rounds, healthy, hung, nil)
	if err != nil {
		return err
	}
	for _, c := range []contender{healthy, hung} {
		sm := res.sums[c.name]
		src := sm.Sources["logistics"]
		n := float64(sm.OK())
		mix := fmt.Sprintf("%s/%s/%s", pc(ratio(float64(src["live"]), n)), pc(ratio(float64(src["cache"]), n)), pc(ratio(float64(src["fallback"]), n)))
		sc := pc(ratio(float64(sm.Reasons["logistics"]["SHORT_CIRCUITED"]), float64(sm.Requests)))
		e.row(c.name, fmt.Sprint(sm.Requests), f0(sm.RPS), cpuCell(res.cpuUS[c.name]), cpuCell(res.redisUS[c.name]), f2(sm.Latency.P50), f2(sm.Latency.P99), mix, sc)
		e.step(c.name, sm, map[string]float64{"cpu_us_per_request": res.cpuUS[c.name], "redis_server_us_per_request": res.redisUS[c.name]})
	}
	pooled := ratio(res.sums[hung.name].RPS, res.sums[healthy.name].RPS)
	e.finding("pages/s hanging ÷ healthy: median round %.2f× (target ≥ 1.00×: %s); all rounds pooled %.2f×; per round %s",
		res.median, verdict(res.median >= 1.0), pooled, roundList(res.perRound))
	all := func(name string) float64 { return res.cpuUS[name] + res.redisUS[name] }
	e.finding("CPU per page, the load generator, simulator and redis-server included: healthy %.0f µs, hanging %.0f µs (%.2f×)",
		all(healthy.name), all(hung.name), ratio(all(hung.name), all(healthy.name)))
	return nil
}

// redisDB is the scenario's Redis URL with database db, when it is the
// redis-server child this run started (a --redis-url is used as given: it
// may name a cluster, which has no databases).
func redisDB(e *experiment, db int) string {
	if e.redisPID == 0 || e.o.RedisURL == "" {
		return e.o.RedisURL
	}
	u, err := url.Parse(e.o.RedisURL)
	if err != nil {
		return e.o.RedisURL
	}
	u.Path = "/" + strconv.Itoa(db)
	return u.String()
}

// pidCPU is the user and system CPU time process pid has used, from Linux's
// /proc; false elsewhere or for pid 0.
func pidCPU(pid int) (time.Duration, bool) {
	if pid == 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	// Clock ticks of USER_HZ, 100 on every Linux architecture Go supports.
	return time.Duration(utime+stime) * (time.Second / 100), true
}
