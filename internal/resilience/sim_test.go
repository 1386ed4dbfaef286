package resilience

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// A discrete-event simulation of traffic through a Guard on the fake clock.
// Calls overlap as they would in production (arrivals at a rate, each in
// flight for its latency, the bulkhead full when they pile up). Each call
// is admitted by the guard's own admit (budget, breaker, bulkhead) and each
// finished attempt goes through its own settle, so the breaker, its trip
// and its window are the production code; only the waiting is simulated,
// which makes a run fast and a pure function of its seed.
//
// The sub-budget is modelled here: a call whose latency reaches simBudget
// ends then as a timeout.

const simBudget = 500 * time.Millisecond

// fate is one call's, drawn when it starts: how long the dependency takes,
// and whether it then fails.
type fate struct {
	latency time.Duration
	fail    bool
}

// model draws a call's outcome; at is the call's start since the run began.
type model func(r *rand.Rand, at time.Duration) fate

// Noise models of a healthy dependency (base latency 50 ms).
var (
	noiseErrors = func(r *rand.Rand, _ time.Duration) fate { // 2 % errors
		return fate{latency: 50 * time.Millisecond, fail: r.Float64() < 0.02}
	}
	noiseJitter = func(r *rand.Rand, _ time.Duration) fate { // ±30 ms
		return fate{latency: 50*time.Millisecond + time.Duration(r.Int64N(int64(60*time.Millisecond)+1)) - 30*time.Millisecond}
	}
	noiseStalls = func(r *rand.Rand, _ time.Duration) fate { // 5 % stall to the budget
		if r.Float64() < 0.05 {
			return fate{latency: simBudget}
		}
		return fate{latency: 50 * time.Millisecond}
	}
)

// faultAt is healthy (50 ms) until onset, then hangs or fails hard until heal
// (0: never heals).
func faultAt(onset, heal time.Duration, hang bool) model {
	return func(_ *rand.Rand, at time.Duration) fate {
		if at < onset || (heal > 0 && at >= heal) {
			return fate{latency: 50 * time.Millisecond}
		}
		if hang {
			return fate{latency: time.Hour}
		}
		return fate{latency: 2 * time.Millisecond, fail: true}
	}
}

type simCall struct {
	start, end time.Duration
	kind       Kind // what the dependency answered, or why it was turned away
	c          *call
}

type eventHeap []*simCall

func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(i, j int) bool { return h[i].end < h[j].end }
func (h eventHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(*simCall)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// simResult is what a run saw.
type simResult struct {
	calls, shortCircuited, rejected int
	firstBad                        time.Duration // first failure or timeout to finish; -1: none
	opens                           []time.Duration
	changes                         []StateChange
	start                           time.Time
	all                             []*simCall
}

// simRecorder keeps state changes (with the fake time they happened).
type simRecorder struct {
	mu      sync.Mutex
	changes []StateChange
}

func (r *simRecorder) OnEvent(context.Context, Event) {}
func (r *simRecorder) OnTimeoutChange(TimeoutChange)  {}
func (r *simRecorder) OnStateChange(c StateChange) {
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
}

// simulate runs rate calls/s for dur through a guard built from cfg, then
// stops (calls still in flight at dur are dropped: in a real outage the
// traffic does not stop, and the last stalls finishing alone after the
// arrivals end would be a run no real traffic shows). Arrival gaps are
// uniform in [0.5, 1.5] of the mean: jittered, never bunched as Poisson
// arrivals can be.
func simulate(cfg Config, rate float64, dur time.Duration, seed uint64, m model) simResult {
	return simulateArrivals(cfg, rate, dur, seed, m, false)
}

// simulateArrivals is simulate with, when poisson, exponential gaps between
// arrivals (bunches and lulls, as independent visitors make).
func simulateArrivals(cfg Config, rate float64, dur time.Duration, seed uint64, m model, poisson bool) simResult {
	clk := newFakeClock()
	rec := &simRecorder{}
	if cfg.Timeout == 0 {
		cfg.Timeout = simBudget
	}
	g, err := New("sim", cfg, WithClock(clk), WithListener(rec))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	res := simResult{firstBad: -1, start: clk.Now()}
	gap := time.Duration(float64(time.Second) / rate)
	var h eventHeap
	next := time.Duration(0)
	at := func(d time.Duration) time.Time {
		if now := clk.Now().Sub(res.start); d > now {
			clk.Advance(d - now)
		}
		return clk.Now()
	}
	for next < dur {
		if h.Len() > 0 && h[0].end <= next {
			sc := heap.Pop(&h).(*simCall)
			end := at(sc.end)
			g.inUse.Add(-1)
			sc.c.settle(Event{Dependency: g.name, Attempt: 1, Start: res.start.Add(sc.start), Duration: end.Sub(res.start.Add(sc.start)), Kind: sc.kind})
			if (sc.kind == KindFailure || sc.kind == KindTimeout) && res.firstBad < 0 {
				res.firstBad = sc.end
			}
			continue
		}
		now := at(next)
		sc := &simCall{start: next}
		res.all = append(res.all, sc)
		res.calls++
		if poisson {
			next += time.Duration(rng.ExpFloat64() * float64(gap))
		} else {
			next += gap/2 + time.Duration(rng.Int64N(int64(gap)+1))
		}
		f := m(rng, sc.start)
		sc.c = &call{g: g, s: g.cur.Load(), ctx: ctx, span: noSpan, start: now, end: now.Add(simBudget)}
		if err := sc.c.admit(); err != nil {
			sc.kind = KindOf(err)
			if sc.kind == KindShortCircuited {
				res.shortCircuited++
			} else {
				res.rejected++
			}
			continue
		}
		switch {
		case f.latency >= simBudget:
			sc.end, sc.kind = sc.start+simBudget, KindTimeout
		case f.fail:
			sc.end, sc.kind = sc.start+f.latency, KindFailure
		default:
			sc.end, sc.kind = sc.start+f.latency, KindSuccess
		}
		heap.Push(&h, sc)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	res.changes = rec.changes
	for _, c := range rec.changes {
		if c.To == StateOpen {
			res.opens = append(res.opens, c.At.Sub(res.start))
		}
	}
	return res
}

// simCfg is a downstream's guard as the registry sets it up, with a
// bulkhead sized for the rate (Little's law with headroom, at least 50).
func simCfg(rate float64) Config {
	return Config{Bulkhead: BulkheadConfig{MaxConcurrent: max(50, int(rate*0.2))}}
}
