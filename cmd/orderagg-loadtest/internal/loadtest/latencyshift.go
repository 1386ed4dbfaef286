package loadtest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/sim"
)

// The latency-shift experiment (issue 16, item 5): logistics drifts from
// 150 ms to 450 ms and back, with jitter, while two orderagg instances sit
// side by side in front of the same simulator: one with logistics' static
// 500 ms sub-budget, one with timeout: auto.
const (
	shiftJitter  = 50 * time.Millisecond // each answer takes level ± 50 ms, uniformly
	shiftAutoMax = 1000 * time.Millisecond
	// shiftBulkhead is logistics' bulkhead in both instances: at 100 req/s
	// and up to 500 ms, Little's law keeps up to 50 calls in flight, the
	// default bulkhead's size, and its rejections would hide the timeouts
	// this experiment is about.
	shiftBulkhead = 120
	// shiftRamp is how long a drift from one level to the next takes; the
	// simulator's latency moves in shiftTick steps along it.
	shiftRamp = 5 * time.Second
	shiftTick = 250 * time.Millisecond
)

// shiftLevels are the held latency levels, in order; the first is a
// warm-up (the auto instance starts from the static 500 ms and needs a
// window of history before its first move) and is not reported.
var shiftLevels = []time.Duration{150, 150, 250, 350, 450, 350, 250, 150}

const (
	stepStatic = "static 500ms"
	stepAuto   = "auto"
)

func latencyShift(ctx context.Context, e *experiment) error {
	r := newShiftRun(e)
	r.describe(e)
	sh := uniformShape(profileFast)
	sh.faults[sim.ServiceLogistics] = shiftFault(r.levels[0])
	s, err := startSim(sh)
	if err != nil {
		return err
	}
	defer s.stop()
	stop, err := r.startServices(ctx, s.url, e.o.RedisURL)
	if err != nil {
		return err
	}
	defer stop()
	if err := r.drive(ctx, e, s); err != nil {
		return err
	}
	r.conclude(e, r.tabulate(e))
	return nil
}

// shiftRun is one latency-shift run: its schedule, its two instances and
// what was recorded of them.
type shiftRun struct {
	phase, ramp, steadyFrom, total time.Duration
	levels                         []time.Duration
	rate                           float64
	bulkhead                       int
	p                              plan

	urls map[string]string    // by step (stepStatic, stepAuto)
	recs map[string]*recorder // by step
	// marks[name][i] are logistics' counters at the start and the end of
	// phase i's steady state; first are those before any load.
	marks     map[string][]shiftMark
	first     map[string]logisticsCounts
	scrapeErr error
}

type shiftMark struct{ from, to logisticsCounts }

// shiftSteps are the two instances, in the table's order.
var shiftSteps = []string{stepStatic, stepAuto}

func newShiftRun(e *experiment) *shiftRun {
	r := &shiftRun{phase: 20 * time.Second, rate: 100.0, urls: map[string]string{}}
	if e.o.given("duration") {
		r.phase = e.o.Duration
	}
	if e.o.given("rate") && e.o.Rate > 0 {
		r.rate = e.o.Rate
	}
	// Steady state is the second half of each phase: the drift is over and
	// the rolling window (10 s) is mostly of the new level. (Short phases,
	// as in tests, drift faster.)
	r.ramp = min(shiftRamp, r.phase/4)
	r.steadyFrom = max(r.phase/2, r.ramp)
	r.levels = make([]time.Duration, len(shiftLevels))
	for i, l := range shiftLevels {
		r.levels[i] = l * time.Millisecond
	}
	r.total = time.Duration(len(r.levels)) * r.phase
	r.bulkhead = max(shiftBulkhead, int(r.rate*1.2)) // over twice the Little's-law need at any rate
	r.p = plan{Rate: r.rate, Duration: r.total, MaxRequests: e.o.MaxRequests, IDs: e.o.IDs, Timeout: e.o.Timeout}
	return r
}

func (r *shiftRun) describe(e *experiment) {
	e.report.Load = fmt.Sprintf("open loop, %g req/s to each of two orderagg instances at once, both in front of one simulator (order, inventory, coupon 5 ms); logistics answers in level ± %v (uniform), the level drifting over %v between phases of %v: %v; "+
		"logistics' sub-budget is a static 500ms in one, timeout: auto (starting at 500ms, timeout_max %v) in the other, its bulkhead %d in both (so that it does not reject); steady state is each phase from %v on; the first phase is a warm-up",
		r.rate, shiftJitter, r.ramp, r.phase, fmtLevels(r.levels), shiftAutoMax, r.bulkhead, r.steadyFrom)
	e.report.Columns = []string{"level", "phase", "static: cut by timeout", "static: short-circuited", "static: P99 ms", "static: degraded",
		"auto: sub-budget ms", "auto: cut by timeout", "auto: short-circuited", "auto: P99 ms", "auto: degraded"}
}

// startServices starts the two instances; stop stops them both.
func (r *shiftRun) startServices(ctx context.Context, simURL, redisURL string) (stop func(), err error) {
	edits := map[string]func(*config.Dependencies){
		stepStatic: func(d *config.Dependencies) { // the built-in 500 ms
			d.Update(sim.ServiceLogistics, func(x *config.Dependency) { x.Bulkhead.MaxConcurrent = r.bulkhead })
		},
		stepAuto: func(d *config.Dependencies) {
			d.Update(sim.ServiceLogistics, func(x *config.Dependency) {
				x.Bulkhead.MaxConcurrent = r.bulkhead
				x.AutoTimeout = true
				x.TimeoutMax = shiftAutoMax
			})
		},
	}
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, name := range shiftSteps {
		url, stop, err := startService(ctx, simURL, redisURL, edits[name])
		if err != nil {
			stopAll()
			return nil, err
		}
		stops = append(stops, stop)
		r.urls[name] = url
	}
	return stopAll, nil
}

// drive loads both instances for the whole schedule while the drift runs,
// scraping logistics' counters around each steady state.
func (r *shiftRun) drive(ctx context.Context, e *experiment, s *simStack) error {
	origin := time.Now()
	r.recs = map[string]*recorder{stepStatic: newRecorder().withTimeline(origin), stepAuto: newRecorder().withTimeline(origin)}
	r.marks = map[string][]shiftMark{stepStatic: make([]shiftMark, len(r.levels)), stepAuto: make([]shiftMark, len(r.levels))}
	r.first = map[string]logisticsCounts{}
	r.scrape(ctx, -1, false)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the drift's schedule and the scrapes; ends with ctx or the run
		defer wg.Done()
		r.drift(ctx, s, origin)
	}()
	for _, name := range shiftSteps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := newTarget(r.urls[name], 1024, false)
			defer t.close()
			var progress func(time.Duration)
			if name == stepAuto && e.tty {
				progress = progressLine(e.stderr, "latency-shift: ", r.p, r.recs[name])
			}
			run(ctx, t, r.p, r.recs[name], progress)
		}()
	}
	wg.Wait()
	if e.tty {
		fmt.Fprint(e.stderr, "\r\033[K")
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if r.scrapeErr != nil {
		return fmt.Errorf("reading /metrics: %w", r.scrapeErr)
	}
	return nil
}

// drift moves logistics' latency from level to level on the schedule that
// starts at origin, scraping both instances around each steady state. It
// returns at the schedule's end or when ctx ends.
func (r *shiftRun) drift(ctx context.Context, s *simStack, origin time.Time) {
	prev := r.levels[0]
	for i, level := range r.levels {
		start := origin.Add(time.Duration(i) * r.phase)
		// The drift: linear from the previous level over ramp.
		for at := time.Duration(0); prev != level; at = min(at+shiftTick, r.ramp) {
			if !sleepUntil(ctx, start.Add(at)) {
				return
			}
			_ = s.sim.SetFault(sim.ServiceLogistics, shiftFault(prev+(level-prev)*at/r.ramp))
			if at == r.ramp {
				break
			}
		}
		prev = level
		if !sleepUntil(ctx, start.Add(r.steadyFrom)) {
			return
		}
		r.scrape(ctx, i, false)
		if !sleepUntil(ctx, start.Add(r.phase)) {
			return
		}
		r.scrape(ctx, i, true)
	}
}

// scrape reads both instances' logistics counters: before any load when i
// is negative, else at the start (or, with end, the end) of phase i's
// steady state. The first error is kept for drive to report.
func (r *shiftRun) scrape(ctx context.Context, i int, end bool) {
	for name, url := range r.urls {
		c, err := scrapeLogistics(ctx, url)
		if err != nil && r.scrapeErr == nil {
			r.scrapeErr = err
		}
		switch {
		case i < 0:
			r.first[name] = c
		case end:
			r.marks[name][i].to = c
		default:
			r.marks[name][i].from = c
		}
	}
}

// shiftTotals are the steady states' figures over every level.
type shiftTotals struct {
	cut                    map[string][2]int64 // by step: timeouts, attempts
	worstStatic, worstAuto float64             // the highest share cut at one level
}

// tabulate writes a row per level after the warm-up: what each instance's
// sub-budget cut in that level's steady state, and its pages.
func (r *shiftRun) tabulate(e *experiment) shiftTotals {
	ps, sf := int(r.phase/time.Second), int(r.steadyFrom/time.Second)
	t := shiftTotals{cut: map[string][2]int64{}}
	for i := 1; i < len(r.levels); i++ {
		row := []string{fmt.Sprintf("%d ms", r.levels[i].Milliseconds()), fmt.Sprintf("%d–%d s", i*ps, (i+1)*ps)}
		for _, name := range shiftSteps {
			d := r.marks[name][i].to.minus(r.marks[name][i].from)
			share := ratio(float64(d.timeouts), float64(d.attempts))
			c := t.cut[name]
			t.cut[name] = [2]int64{c[0] + d.timeouts, c[1] + d.attempts}
			ok, deg, failed, lat := r.recs[name].phase(i*ps+sf, (i+1)*ps)
			cells := []string{pct3(share), pct3(ratio(float64(d.short), float64(d.attempts+d.short))), f1(lat.P99), pc(ratio(float64(deg), float64(ok+deg+failed)))}
			if name == stepAuto {
				t.worstAuto = max(t.worstAuto, share)
				autoTO := f0(r.marks[name][i].to.timeout.Seconds() * 1000)
				cells = append([]string{autoTO}, cells...)
			} else {
				t.worstStatic = max(t.worstStatic, share)
			}
			row = append(row, cells...)
		}
		e.row(row...)
	}
	return t
}

// conclude records each instance's step and the findings: the steady
// states against issue 16's target, then the whole run.
func (r *shiftRun) conclude(e *experiment, t shiftTotals) {
	cut := t.cut
	whole := map[string]logisticsCounts{}
	for _, name := range shiftSteps {
		whole[name] = r.marks[name][len(r.levels)-1].to.minus(r.first[name])
		e.step(name, r.recs[name].summary(r.total), map[string]float64{
			"steady_timeouts": float64(cut[name][0]), "steady_attempts": float64(cut[name][1]),
			"attempts": float64(whole[name].attempts),
		})
	}
	e.finding("in steady state the static 500 ms sub-budget cut up to %s of logistics calls at a level (%d of %d over all levels), auto up to %s (%d of %d): issue 16's target is ≤ 0.1 %% at each level under auto — %s",
		pct3(t.worstStatic), cut[stepStatic][0], cut[stepStatic][1], pct3(t.worstAuto), cut[stepAuto][0], cut[stepAuto][1], verdict(t.worstAuto <= 0.001))
	e.finding("whole run, warm-up and drifts included: timeouts cut %d of %d logistics calls (%s) static, %d of %d (%s) auto; the breaker turned away %d static, %d auto",
		whole[stepStatic].timeouts, whole[stepStatic].attempts, pct3(ratio(float64(whole[stepStatic].timeouts), float64(whole[stepStatic].attempts))),
		whole[stepAuto].timeouts, whole[stepAuto].attempts, pct3(ratio(float64(whole[stepAuto].timeouts), float64(whole[stepAuto].attempts))),
		whole[stepStatic].short, whole[stepAuto].short)
	stA, stS := r.recs[stepAuto].summary(r.total), r.recs[stepStatic].summary(r.total)
	e.finding("whole run: page P99 %.1f ms static, %.1f ms auto; degraded pages %s static, %s auto",
		stS.Latency.P99, stA.Latency.P99, pc(stS.DegradedRatio), pc(stA.DegradedRatio))
}

// shiftFault is logistics at level ± shiftJitter.
func shiftFault(level time.Duration) sim.Fault {
	return sim.Fault{LatencyMS: int((level - shiftJitter).Milliseconds()), JitterMS: int(2 * shiftJitter.Milliseconds())}
}

func fmtLevels(ls []time.Duration) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = strconv.FormatInt(l.Milliseconds(), 10)
	}
	return strings.Join(parts, " → ") + " ms"
}

// pct3 is a share with the precision a 0.1 % target needs.
func pct3(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }

// sleepUntil waits for t or ctx; false means ctx ended.
func sleepUntil(ctx context.Context, t time.Time) bool {
	tm := time.NewTimer(time.Until(t))
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// logisticsCounts are logistics' cumulative attempt outcomes and its
// sub-budget in force, read from one orderagg's /metrics; short counts the
// calls its open breaker turned away.
type logisticsCounts struct {
	timeouts, attempts, short int64
	timeout                   time.Duration
}

func (c logisticsCounts) minus(o logisticsCounts) logisticsCounts {
	return logisticsCounts{timeouts: c.timeouts - o.timeouts, attempts: c.attempts - o.attempts, short: c.short - o.short, timeout: c.timeout}
}

// scrapeLogistics reads logistics' events and sub-budget from /metrics. An
// attempt is an answer or a timeout: success, failure, timeout, bad_request.
func scrapeLogistics(ctx context.Context, base string) (logisticsCounts, error) {
	var c logisticsCounts
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return c, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sawEvents, sawTimeout bool
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `dependency="logistics"`) {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		_, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err != nil {
			return c, fmt.Errorf("metrics line %q: %w", line, err)
		}
		switch name {
		case "orderagg_dependency_events_total":
			sawEvents = true
			for _, ev := range []string{"success", "failure", "timeout", "bad_request"} {
				if strings.Contains(rest, `event="`+ev+`"`) {
					c.attempts += int64(v)
					if ev == "timeout" {
						c.timeouts += int64(v)
					}
				}
			}
			if strings.Contains(rest, `event="short_circuited"`) {
				c.short += int64(v)
			}
		case "orderagg_dependency_timeout_seconds":
			sawTimeout = true
			c.timeout = time.Duration(v * float64(time.Second))
		}
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	if !sawEvents || !sawTimeout {
		return c, fmt.Errorf("no logistics events or sub-budget in %s/metrics", base)
	}
	return c, nil
}
