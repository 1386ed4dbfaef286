package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/sim"
)

// breakerWatch polls orderagg's /v1/resilience and records every change of
// a breaker's state with the time it was seen. An open breaker stays open
// for at least its first sleep window (500 ms by default), so a 10 ms poll
// sees every opening; the time of one is known to within the poll.
type breakerWatch struct {
	url  string
	mu   sync.Mutex
	last map[string]string
	seen []breakerChange
	stop func()
}

type breakerChange struct {
	At         time.Time
	Dependency string
	To         string
}

const watchEvery = 10 * time.Millisecond

func watchBreakers(ctx context.Context, aggURL string) *breakerWatch {
	w := &breakerWatch{url: strings.TrimRight(aggURL, "/") + "/v1/resilience", last: map[string]string{}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	client := &http.Client{Timeout: time.Second}
	go func() {
		defer close(done)
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		for {
			w.poll(ctx, client)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	w.stop = func() { cancel(); <-done; client.CloseIdleConnections() }
	return w
}

func (w *breakerWatch) poll(ctx context.Context, client *http.Client) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url, nil)
	if err != nil {
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var doc struct {
		Dependencies []struct {
			Name    string `json:"name"`
			Breaker string `json:"breaker"`
		} `json:"dependencies"`
	}
	if json.NewDecoder(resp.Body).Decode(&doc) != nil {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range doc.Dependencies {
		prev, known := w.last[d.Name]
		if !known {
			prev = "CLOSED"
		}
		if d.Breaker != prev {
			w.seen = append(w.seen, breakerChange{At: now, Dependency: d.Name, To: d.Breaker})
		}
		w.last[d.Name] = d.Breaker
	}
}

// changes returns what was seen, in order.
func (w *breakerWatch) changes() []breakerChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]breakerChange(nil), w.seen...)
}

// firstOpen is the first time dep's breaker was seen OPEN at or after from.
func (w *breakerWatch) firstOpen(dep string, from time.Time) (time.Time, bool) {
	for _, c := range w.changes() {
		if c.Dependency == dep && c.To == "OPEN" && !c.At.Before(from) {
			return c.At, true
		}
	}
	return time.Time{}, false
}

// opens counts the openings per dependency.
func (w *breakerWatch) opens() map[string]int {
	out := map[string]int{}
	for _, c := range w.changes() {
		if c.To == "OPEN" {
			out[c.Dependency]++
		}
	}
	return out
}

// countAbove is how many recorded values are at least d (by bucket: values
// in d's own bucket count, within the histogram's 0.8 %).
func (h *histogram) countAbove(d time.Duration) int64 {
	var n int64
	from := bucketOf(d.Microseconds())
	for i := from; i < len(h.counts); i++ {
		n += h.counts[i]
	}
	return n
}

// phaseAbove counts the answers of the timeline's seconds [from, to) that
// took at least d.
func (r *recorder) phaseAbove(from, to int, d time.Duration) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for i := max(from, 0); i < to && i < len(r.timeline); i++ {
		n += r.timeline[i].hist.countAbove(d)
	}
	return n
}

// The noise of issue 16 on logistics, all at once: 150 ms ± 30 ms, 2 %
// errors, and the study's 5 % stalls to 500 ms (its sub-budget, so each
// stall is a timeout).
var (
	noisyLogistics = sim.Fault{LatencyMS: 120, JitterMS: 60, ErrorRate: 0.02}
	noisyStall     = stall{rate: 0.05, extra: 350 * time.Millisecond}
)

// flapping drives orderagg open loop through a minute of noise on logistics
// and counts the breaker openings (none is the goal) two ways: polled from
// /v1/resilience, and SHORT_CIRCUITED sections in the pages.
func flapping(ctx context.Context, e *experiment) error {
	dur := 60 * time.Second
	if e.o.given("duration") {
		dur = e.o.Duration
	}
	rate := 100.0
	if e.o.given("rate") && e.o.Rate > 0 {
		rate = e.o.Rate
	}
	p := plan{Rate: rate, Duration: dur, MaxRequests: e.o.MaxRequests, IDs: e.o.IDs, Timeout: e.o.Timeout}
	sh := uniformShape(profileFast)
	sh.faults[sim.ServiceLogistics] = noisyLogistics
	sh.stalls = map[string]stall{sim.ServiceLogistics: noisyStall}
	e.report.Load = fmt.Sprintf("open loop, %g req/s for %s, no warm-up; order, inventory, coupon 5 ms; logistics 150 ms ± 30 ms (uniform), 2 %% errors (503) and 5 %% stalls of +350 ms (to its 500 ms sub-budget); breakers polled every %s",
		rate, dur, watchEvery)
	e.report.Columns = []string{"requests", "logistics live", "logistics TIMEOUT", "logistics FAILURE", "SHORT_CIRCUITED sections", "breaker openings", "P50 ms", "P99 ms"}
	st, err := e.up(ctx, sh, kindOrderagg, nil, 0)
	if err != nil {
		return err
	}
	defer st.stop()
	w := watchBreakers(ctx, st.url)
	s, _ := e.measure(ctx, "flapping", st.url, p, nil)
	w.stop()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	shorted := int64(0)
	for _, reasons := range s.Reasons {
		shorted += reasons["SHORT_CIRCUITED"]
	}
	opens := w.opens()
	total := 0
	var which []string
	for dep, n := range opens {
		total += n
		which = append(which, fmt.Sprintf("%s %d", dep, n))
	}
	sort.Strings(which)
	lr := s.Reasons["logistics"]
	e.row(fmt.Sprint(s.Requests), fmt.Sprint(s.Live("logistics")), fmt.Sprint(lr["TIMEOUT"]), fmt.Sprint(lr["FAILURE"]),
		fmt.Sprint(shorted), fmt.Sprint(total), f1(s.Latency.P50), f1(s.Latency.P99))
	e.step("flapping", s, map[string]float64{"breaker_openings": float64(total), "short_circuited_sections": float64(shorted)})
	if total == 0 && shorted == 0 {
		e.finding("%s of noise on logistics at %g req/s: zero breaker openings (polled) and zero SHORT_CIRCUITED sections in %d pages — met", dur, rate, s.Requests)
	} else {
		e.finding("%s of noise on logistics at %g req/s: %d breaker openings (%s) and %d SHORT_CIRCUITED sections — NOT met", dur, rate, total, strings.Join(which, ", "), shorted)
	}
	e.finding("logistics calls that failed the page's section: %d timeouts and %d failures of %d pages (%s); each was answered from the last-good cache or as UNKNOWN",
		lr["TIMEOUT"], lr["FAILURE"], s.Requests, pc(ratio(float64(lr["TIMEOUT"]+lr["FAILURE"]), float64(s.Requests))))
	return nil
}

// kindOldBreaker is orderagg with the breaker settings before the
// consecutive-failure trip: a trip only on the 10 s rate window, and a 5 s
// sleep.
const kindOldBreaker = "orderagg, old breaker"

func rateWindowOnly(d *config.Dependencies) {
	for _, name := range d.Names() {
		d.Update(name, func(x *config.Dependency) {
			x.Breaker.ConsecutiveFailures = 1_000_000_000 // never reached
			x.Breaker.SleepWindow = 5 * time.Second
		})
	}
}

// slowPage is a page that waited for the hung dependency: ten times the
// healthy page's few milliseconds, still short of logistics' 500 ms
// sub-budget.
const slowPage = 100 * time.Millisecond

// outageDetection adds to the outage report how long logistics' breaker
// took to open once the hang began, and how many pages paid for it.
func outageDetection(e *experiment, kind string, w *breakerWatch, rec *recorder, origin time.Time, phase time.Duration, rate float64) {
	ps := int(phase / time.Second)
	hangAt := origin.Add(phase)
	slow := rec.phaseAbove(ps, 2*ps, slowPage)
	_, _, _, lat := rec.phase(ps, 2*ps)
	opened, ok := w.firstOpen("logistics", hangAt)
	if !ok {
		e.finding("%s: logistics' breaker was never seen OPEN during the hang; %d pages of the hang phase took ≥ %s (P50 %.1f ms, P99 %.1f ms)", kind, slow, slowPage, lat.P50, lat.P99)
		return
	}
	tto := opened.Sub(hangAt)
	e.finding("%s: time to open: logistics' breaker was seen OPEN %d ms after the hang began (polled every %s); %d pages of the hang phase took ≥ %s, %.1f s of traffic at %g req/s; hang phase P50 %.1f ms, P99 %.1f ms",
		kind, tto.Milliseconds(), watchEvery, slow, slowPage, float64(slow)/rate, rate, lat.P50, lat.P99)
	for i := range e.report.Steps {
		if e.report.Steps[i].Name == kind {
			e.report.Steps[i].Derived = map[string]float64{"time_to_open_ms": float64(tto.Milliseconds()), "slow_pages": float64(slow), "hang_p50_ms": lat.P50, "hang_p99_ms": lat.P99}
		}
	}
	var other []string
	for _, c := range w.changes() {
		other = append(other, fmt.Sprintf("%s %s at %.2f s", c.Dependency, c.To, c.At.Sub(origin).Seconds()))
	}
	e.note("%s: breaker changes seen: %s", kind, strings.Join(other, "; "))
}
