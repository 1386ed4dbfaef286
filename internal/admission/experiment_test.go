package admission_test

// The admission experiment: a real handlers.New router on a loopback
// httptest server, in front of a fake Pager, driven by an open-loop load
// (arrivals do not wait for answers). It compares admission limiters under
// overload, at a healthy load, and with a slow dependency. It runs only when
// ORDERAGG_ADMISSION_EXPERIMENT=1:
//
//	ORDERAGG_ADMISSION_EXPERIMENT=1 go test -run TestAdmissionExperiment -v -timeout 30m ./internal/admission/
//
// Knobs (environment): ORDERAGG_ADMISSION_SERVICE, the CPU work per request
// (default 2ms); ORDERAGG_ADMISSION_DURATION, each measured phase (default
// 10s); ORDERAGG_ADMISSION_SCENARIOS, a comma list of overload, healthy,
// slowdep, slowdep-over (default all); ORDERAGG_ADMISSION_SMALL, the small
// fixed limit (default 16); ORDERAGG_ADMISSION_REPEATS, runs of each, whose
// per-metric medians are reported (default 3); ORDERAGG_ADMISSION_OVERLOAD,
// the overload as a multiple of capacity (default 10).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/admission"
	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/orderdetail"
)

const deadline = 1500 * time.Millisecond

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// ---- the fake service ----

var sink atomic.Uint64

// spin burns n rounds of an FNV-style hash: real CPU work the compiler
// cannot drop.
func spin(n int) {
	h := uint64(14695981039346656037)
	for i := range n {
		h ^= uint64(i)
		h *= 1099511628211
	}
	sink.Add(h)
}

// calibrate returns the spin rounds that take d of CPU on an idle core.
func calibrate(d time.Duration) int {
	const n = 2_000_000
	best := time.Duration(math.MaxInt64)
	for range 7 {
		start := time.Now()
		spin(n)
		best = min(best, time.Since(start))
	}
	return int(float64(n) * float64(d) / float64(best))
}

// cpuPager is a processor-sharing server: each page costs service of CPU,
// burnt in ~100µs slices with a yield between them, so concurrent pages
// share the two cores round-robin and queue on them like a CPU-bound
// service does. It gives up (an error) when the request's context ends.
type cpuPager struct {
	slices     int
	sliceSpins int
}

func newCPUPager(service time.Duration) *cpuPager {
	const slice = 100 * time.Microsecond
	n := max(1, int(service/slice))
	return &cpuPager{slices: n, sliceSpins: calibrate(service / time.Duration(n))}
}

func (p *cpuPager) Get(ctx context.Context, id string) (*orderdetail.Page, error) {
	for range p.slices {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		spin(p.sliceSpins)
		runtime.Gosched()
	}
	return page(id), nil
}

// ioPager waits (a dependency's latency, no CPU) and then answers.
type ioPager struct{ latency atomic.Int64 }

func (p *ioPager) Get(ctx context.Context, id string) (*orderdetail.Page, error) {
	t := time.NewTimer(time.Duration(p.latency.Load()))
	defer t.Stop()
	select {
	case <-t.C:
		return page(id), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func page(id string) *orderdetail.Page {
	return &orderdetail.Page{OrderID: id, Sections: []orderdetail.Section{
		{Name: "order", Source: orderdetail.SourceLive, BodyKey: "data", Body: orderdetail.Order{ID: id, Status: "PAID"}},
	}}
}

// ---- the load ----

type result struct {
	status     int
	overloaded bool // 503 OVERLOADED (admission), not ORDER_UNAVAILABLE
	err        bool // transport error or client timeout
	latency    time.Duration
}

type rig struct {
	srv    *httptest.Server
	tr     *http.Transport
	client *http.Client
}

func newRig(p handlers.Pager, l admission.Limiter) *rig {
	h := handlers.New(handlers.Options{Pager: p, Deadline: deadline, Limiter: l, Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(h)
	tr := &http.Transport{MaxIdleConnsPerHost: 8192, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	return &rig{srv: srv, tr: tr, client: &http.Client{Transport: tr, Timeout: 5 * time.Second}}
}

func (r *rig) close() {
	r.tr.CloseIdleConnections()
	r.srv.Close()
}

func (r *rig) one(i int) result {
	start := time.Now()
	resp, err := r.client.Get(r.srv.URL + "/v1/orders/o-" + strconv.Itoa(i))
	if err != nil {
		return result{err: true, latency: time.Since(start)}
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	res := result{status: resp.StatusCode, latency: time.Since(start), err: err != nil}
	res.overloaded = resp.StatusCode == http.StatusServiceUnavailable && bytes.Contains(body, []byte(handlers.CodeOverloaded))
	return res
}

// open sends Poisson arrivals at rate per second for d, each on its own
// goroutine, and returns every answer once all have come back.
func (r *rig) open(rate float64, d time.Duration, seed uint64) []result {
	rng := rand.New(rand.NewPCG(seed, 7))
	var mu sync.Mutex
	var out []result
	var wg sync.WaitGroup
	start := time.Now()
	next := start
	for i := 0; ; i++ {
		next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if next.Sub(start) >= d {
			break
		}
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		}
		wg.Go(func() {
			res := r.one(i)
			mu.Lock()
			out = append(out, res)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// closed runs workers back-to-back for d and returns the 200s per second.
func (r *rig) closed(workers int, d time.Duration) float64 {
	var ok atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; time.Now().Before(stop); i += workers {
				if r.one(i).status == http.StatusOK {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(ok.Load()) / d.Seconds()
}

// ---- the report ----

type row struct {
	scenario, limiter             string
	offered, sent                 float64 // per second
	goodput                       float64 // 200s per second
	share                         float64 // goodput ÷ capacity (CPU-bound scenarios) or ÷ offered (slow dependency)
	p50ok, p99ok                  time.Duration
	p99rej                        time.Duration
	rejected, other               float64 // shares of all requests: OVERLOADED; any other non-200
	limitMin, limitMean, limitMax float64
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}

func summarize(scenario, limiter string, offered, capacity float64, d time.Duration, res []result, lim []float64) row {
	var ok, rej []time.Duration
	other := 0
	for _, r := range res {
		switch {
		case r.status == http.StatusOK:
			ok = append(ok, r.latency)
		case r.overloaded:
			rej = append(rej, r.latency)
		default:
			other++
		}
	}
	n := float64(max(1, len(res)))
	rw := row{
		scenario: scenario, limiter: limiter, offered: offered, sent: float64(len(res)) / d.Seconds(),
		goodput: float64(len(ok)) / d.Seconds(),
		p50ok:   pct(ok, 0.50), p99ok: pct(ok, 0.99), p99rej: pct(rej, 0.99),
		rejected: float64(len(rej)) / n, other: float64(other) / n,
	}
	rw.share = rw.goodput / capacity
	if len(lim) > 0 {
		rw.limitMin, rw.limitMax = slices.Min(lim), slices.Max(lim)
		for _, v := range lim {
			rw.limitMean += v
		}
		rw.limitMean /= float64(len(lim))
	}
	return rw
}

// median takes each metric's median over repeated runs of one row.
func median(rs []row) row {
	m := rs[0]
	f := func(get func(r *row) *float64) {
		v := make([]float64, len(rs))
		for i := range rs {
			v[i] = *get(&rs[i])
		}
		slices.Sort(v)
		*get(&m) = v[len(v)/2]
	}
	d := func(get func(r *row) *time.Duration) {
		v := make([]time.Duration, len(rs))
		for i := range rs {
			v[i] = *get(&rs[i])
		}
		slices.Sort(v)
		*get(&m) = v[len(v)/2]
	}
	f(func(r *row) *float64 { return &r.offered })
	f(func(r *row) *float64 { return &r.sent })
	f(func(r *row) *float64 { return &r.goodput })
	f(func(r *row) *float64 { return &r.share })
	f(func(r *row) *float64 { return &r.rejected })
	f(func(r *row) *float64 { return &r.other })
	f(func(r *row) *float64 { return &r.limitMin })
	f(func(r *row) *float64 { return &r.limitMean })
	f(func(r *row) *float64 { return &r.limitMax })
	d(func(r *row) *time.Duration { return &r.p50ok })
	d(func(r *row) *time.Duration { return &r.p99ok })
	d(func(r *row) *time.Duration { return &r.p99rej })
	return m
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }

// sampleLimit records l.Limit() every 20ms until stop is closed.
func sampleLimit(l admission.Limiter, stop <-chan struct{}) <-chan []float64 {
	out := make(chan []float64, 1)
	go func() {
		var v []float64
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				v = append(v, float64(l.Limit()))
			case <-stop:
				out <- v
				return
			}
		}
	}()
	return out
}

// phase drives rate for d and summarizes it, sampling the limit meanwhile.
// capacity is what goodput is compared with (0: the offered rate).
func phase(r *rig, l admission.Limiter, scenario, name string, rate, capacity float64, d time.Duration, seed uint64) row {
	stop := make(chan struct{})
	lims := sampleLimit(l, stop)
	res := r.open(rate, d, seed)
	close(stop)
	if capacity == 0 {
		capacity = rate
	}
	return summarize(scenario, name, rate, capacity, d, res, <-lims)
}

func TestAdmissionExperiment(t *testing.T) {
	if os.Getenv("ORDERAGG_ADMISSION_EXPERIMENT") != "1" {
		t.Skip("set ORDERAGG_ADMISSION_EXPERIMENT=1 to run the admission experiment")
	}
	service := envDuration(t, "ORDERAGG_ADMISSION_SERVICE", 2*time.Millisecond)
	dur := envDuration(t, "ORDERAGG_ADMISSION_DURATION", 10*time.Second)
	small := 16
	if v := os.Getenv("ORDERAGG_ADMISSION_SMALL"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		small = n
	}
	factor := 10.0
	if v := os.Getenv("ORDERAGG_ADMISSION_OVERLOAD"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 1 {
			t.Fatalf("ORDERAGG_ADMISSION_OVERLOAD=%q", v)
		}
		factor = f
	}
	scenarios := "overload,healthy,slowdep,slowdep-over"
	if v := os.Getenv("ORDERAGG_ADMISSION_SCENARIOS"); v != "" {
		scenarios = v
	}
	const maxInflight = 1024
	limiters := []struct {
		name string
		make func() admission.Limiter
	}{
		{"Fixed(1024)", func() admission.Limiter { return admission.Fixed(maxInflight) }},
		{fmt.Sprintf("Fixed(%d)", small), func() admission.Limiter { return admission.Fixed(small) }},
		{"Adaptive(16..1024)", func() admission.Limiter {
			a, err := admission.Adaptive(admission.AdaptiveConfig{Max: maxInflight})
			if err != nil {
				t.Fatal(err)
			}
			return a
		}},
	}

	repeats := 3
	if v := os.Getenv("ORDERAGG_ADMISSION_REPEATS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ORDERAGG_ADMISSION_REPEATS=%q", v)
		}
		repeats = n
	}

	pager := newCPUPager(service)
	needCPU := strings.Contains(scenarios, "overload") || strings.Contains(scenarios, "healthy")
	// capacity measures the CPU-bound service's throughput now: the machine
	// may be shared, so it is measured again before each repeat.
	measureCapacity := func() float64 {
		r := newRig(pager, admission.Fixed(maxInflight))
		defer r.close()
		r.closed(8, time.Second) // warm up connections and the CPU
		c := r.closed(8, 3*time.Second)
		t.Logf("service %v of CPU per page, GOMAXPROCS %d: closed-loop capacity %.0f pages/s", service, runtime.GOMAXPROCS(0), c)
		return c
	}
	var capacities []float64
	byKey := map[string][]row{}
	var order []string
	add := func(rw row) {
		k := rw.scenario + "\x00" + rw.limiter
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], rw)
	}
	slowdep := func(r *rig, p *ioPager, l admission.Limiter, name string, rate float64, lat time.Duration) {
		p.latency.Store(int64(2 * time.Millisecond))
		phase(r, l, "warm-up", name, rate, 0, 2*time.Second, 1)
		p.latency.Store(int64(lat))
		add(phase(r, l, fmt.Sprintf("slow dep %.0f/s×%v", rate, lat), name, rate, 0, dur, 5))
	}
	for rep := range repeats {
		capacity := 0.0
		if needCPU {
			capacity = measureCapacity()
			capacities = append(capacities, capacity)
		}
		for _, sc := range strings.Split(scenarios, ",") {
			for i := range limiters {
				lm := limiters[(i+rep)%len(limiters)] // rotate, so no limiter always runs first
				l := lm.make()
				switch sc {
				case "overload":
					// Healthy first (the limiter learns its baseline), then
					// 10× capacity, then healthy again (recovery).
					r := newRig(pager, l)
					phase(r, l, "warm-up", lm.name, 0.5*capacity, capacity, 2*time.Second, 1)
					add(phase(r, l, fmt.Sprintf("overload %g×", factor), lm.name, factor*capacity, capacity, dur, 2))
					add(phase(r, l, "after it, 0.7×", lm.name, 0.7*capacity, capacity, dur, 3))
					r.close()
				case "healthy":
					r := newRig(pager, l)
					phase(r, l, "warm-up", lm.name, 0.5*capacity, capacity, 2*time.Second, 1)
					add(phase(r, l, "healthy 0.7×", lm.name, 0.7*capacity, capacity, dur, 4))
					r.close()
				case "slowdep":
					// No CPU: a dependency's latency goes from 2ms to 700ms
					// (inside the order's 1000ms sub-budget) at 1000 pages/s:
					// ~700 pages legitimately in flight, under 1024.
					p := new(ioPager)
					r := newRig(p, l)
					slowdep(r, p, l, lm.name, 1000, 700*time.Millisecond)
					r.close()
				case "slowdep-over":
					// The same at 1500/s × 900ms: ~1350 pages would be in
					// flight, over 1024, so Fixed(1024) refuses some too.
					p := new(ioPager)
					r := newRig(p, l)
					slowdep(r, p, l, lm.name, 1500, 900*time.Millisecond)
					r.close()
				default:
					t.Fatalf("unknown scenario %q", sc)
				}
				runtime.GC()
			}
		}
	}
	var rows []row
	for _, k := range order {
		rows = append(rows, median(byKey[k]))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\nservice %v CPU/page, capacity %.0f/s per repeat, phases %v, deadline %v, median of %d runs\n\n", service, capacities, dur, deadline, repeats)
	fmt.Fprintln(&b, "| scenario | limiter | offered/s | sent/s | goodput 200/s | goodput ÷ capacity (or offered) | P50 200 ms | P99 200 ms | P99 503 OVERLOADED ms | rejected | other non-200 | limit min/mean/max |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %.0f | %.2f | %s | %s | %s | %.1f%% | %.1f%% | %.0f/%.0f/%.0f |\n",
			r.scenario, r.limiter, r.offered, r.sent, r.goodput, r.share, ms(r.p50ok), ms(r.p99ok), ms(r.p99rej),
			100*r.rejected, 100*r.other, r.limitMin, r.limitMean, r.limitMax)
	}
	t.Log(b.String())
}
