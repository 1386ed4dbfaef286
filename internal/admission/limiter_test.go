package admission_test

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/orderagg/orderagg/internal/admission"
)

// fakeClock moves only when told to; safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *fakeClock) Now() time.Time          { return t0.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// tb is what both *testing.T and *rapid.T offer.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func newAdaptive(t tb, cfg admission.AdaptiveConfig) (*admission.AdaptiveLimiter, *fakeClock) {
	t.Helper()
	clk := new(fakeClock)
	cfg.Now = clk.Now
	a, err := admission.Adaptive(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, clk
}

// tick offers demand requests at once; those admitted all take lat and end
// with outcome. It returns how many were admitted.
func tick(t tb, l admission.Limiter, clk *fakeClock, demand int, lat time.Duration, o admission.Outcome) int {
	t.Helper()
	var held []admission.Token
	for range demand {
		before := l.Limit()
		tok, ok := l.Acquire()
		if !ok {
			break
		}
		if n := l.Inflight(); n > before {
			t.Fatalf("admitted with %d in flight over a limit of %d", n, before)
		}
		held = append(held, tok)
	}
	clk.Advance(lat)
	for i := range held {
		held[i].Release(o)
	}
	return len(held)
}

func checkBounds(t tb, l admission.Limiter, lo, hi int) {
	t.Helper()
	if got := l.Limit(); got < lo || got > hi {
		t.Fatalf("limit %d outside [%d, %d]", got, lo, hi)
	}
}

func TestFixedSemantics(t *testing.T) {
	f := admission.Fixed(3)
	var toks []admission.Token
	for i := range 3 {
		tok, ok := f.Acquire()
		if !ok {
			t.Fatalf("acquire %d refused under the cap", i)
		}
		toks = append(toks, tok)
	}
	if tok, ok := f.Acquire(); ok || tok.Held() {
		t.Fatal("4th acquire admitted over Fixed(3)")
	}
	if f.Inflight() != 3 || f.Limit() != 3 {
		t.Fatalf("inflight %d limit %d, want 3 3", f.Inflight(), f.Limit())
	}
	toks[0].Release(admission.Succeeded)
	toks[0].Release(admission.Succeeded) // no-op
	if f.Inflight() != 2 {
		t.Fatalf("inflight %d after one release (twice), want 2", f.Inflight())
	}
	if _, ok := f.Acquire(); !ok {
		t.Fatal("refused after a release")
	}
	for _, n := range []int{0, -1} {
		if _, ok := admission.Fixed(n).Acquire(); ok {
			t.Fatalf("Fixed(%d) admitted a request", n)
		}
	}
}

func TestTokenZeroAndNewToken(t *testing.T) {
	var zero admission.Token
	zero.Release(admission.Dropped) // must not panic
	if zero.Held() {
		t.Fatal("zero token held")
	}
	var got []admission.Outcome
	var stamps []int64
	rel := admission.ReleaseFunc(func(s int64, o admission.Outcome) { stamps, got = append(stamps, s), append(got, o) })
	tok := admission.NewToken(rel, 42)
	tok.Release(admission.Dropped)
	tok.Release(admission.Succeeded)
	if len(got) != 1 || got[0] != admission.Dropped || stamps[0] != 42 {
		t.Fatalf("released %v %v, want once Dropped stamp 42", got, stamps)
	}
	if nilTok := admission.NewToken(nil, 1); nilTok.Held() {
		t.Fatal("NewToken(nil) holds a slot")
	}
}

func TestAdaptiveConfig(t *testing.T) {
	for name, cfg := range map[string]admission.AdaptiveConfig{
		"no max":            {},
		"min over max":      {Max: 4, Min: 5},
		"negative min":      {Max: 4, Min: -1},
		"tolerance below 1": {Max: 4, Tolerance: 0.9},
		"negative window":   {Max: 4, Window: -time.Second},
		"negative samples":  {Max: 4, MinSamples: -1},
		"negative settle":   {Max: 4, Settle: -time.Second},
	} {
		if _, err := admission.Adaptive(cfg); !errors.Is(err, admission.ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", name, err)
		}
	}
	a, err := admission.Adaptive(admission.AdaptiveConfig{Max: 8})
	if err != nil {
		t.Fatal(err)
	}
	if a.Limit() != 8 || a.Inflight() != 0 {
		t.Fatalf("starts at limit %d inflight %d, want 8 0", a.Limit(), a.Inflight())
	}
}

// testCfg never undoes a cut unless a test sets Settle.
var testCfg = admission.AdaptiveConfig{Max: 256, Min: 8, Window: 10 * time.Millisecond, MinSamples: 1, Settle: time.Hour}

func TestAdaptiveHealthyStaysAtMax(t *testing.T) {
	a, clk := newAdaptive(t, testCfg)
	for range 200 {
		lat := time.Millisecond + time.Duration(rand.IntN(400))*time.Microsecond // jitter within tolerance
		tick(t, a, clk, 400, lat, admission.Succeeded)
		checkBounds(t, a, 256, 256)
	}
}

func TestAdaptiveLatencyShrinksAndRecovers(t *testing.T) {
	a, clk := newAdaptive(t, testCfg)
	for range 50 {
		tick(t, a, clk, 400, 2*time.Millisecond, admission.Succeeded)
	}
	if a.Limit() != 256 {
		t.Fatalf("limit %d at baseline latency, want 256", a.Limit())
	}
	if b := a.Baseline(); b != 2*time.Millisecond {
		t.Fatalf("baseline %v, want 2ms", b)
	}
	// Latency grows step by step: the limit never grows, and ends at Min.
	prev := a.Limit()
	for _, lat := range []time.Duration{4, 8, 16, 32, 64} {
		for range 20 {
			tick(t, a, clk, 400, lat*time.Millisecond, admission.Succeeded)
			checkBounds(t, a, 8, 256)
			if a.Limit() > prev {
				t.Fatalf("limit grew %d → %d while latency rose to %dms", prev, a.Limit(), lat)
			}
			prev = a.Limit()
		}
	}
	if a.Limit() != 8 {
		t.Fatalf("limit %d after latency rose 32×, want Min 8", a.Limit())
	}
	// Back to the baseline: the limit grows back to Max.
	windows := 0
	for ; a.Limit() < 256 && windows < 1000; windows++ {
		before := a.Limit()
		tick(t, a, clk, 400, 2*time.Millisecond, admission.Succeeded)
		if a.Limit() < before {
			t.Fatalf("limit fell %d → %d at baseline latency", before, a.Limit())
		}
	}
	if a.Limit() != 256 {
		t.Fatalf("limit %d after %d healthy windows, want 256", a.Limit(), windows)
	}
	t.Logf("recovered from 8 to 256 in %d windows", windows)
}

func TestAdaptiveIgnoresLatencyWhileNotLimiting(t *testing.T) {
	a, clk := newAdaptive(t, testCfg)
	for range 20 {
		tick(t, a, clk, 20, time.Millisecond, admission.Succeeded)
	}
	// A dependency slows down 100×, so more pages are in flight at the same
	// rate, but the limit refuses no one: it is not the limit's to fix.
	for _, demand := range []int{20, 128, 255} {
		for range 100 {
			tick(t, a, clk, demand, 100*time.Millisecond, admission.Succeeded)
			checkBounds(t, a, 256, 256)
		}
	}
	// Once demand exceeds the limit, the same latency is overload...
	for range 20 {
		tick(t, a, clk, 400, 400*time.Millisecond, admission.Succeeded)
	}
	if a.Limit() != 8 {
		t.Fatalf("limit %d with demand over it at 4× the latency, want Min 8", a.Limit())
	}
	// ...and once demand falls under it, the limit relaxes back to Max
	// even though latency is still high.
	for range 100 {
		tick(t, a, clk, 4, 400*time.Millisecond, admission.Succeeded)
	}
	if a.Limit() != 256 {
		t.Fatalf("limit %d with demand under it, want it relaxed to 256", a.Limit())
	}
}

// A dependency slows down while demand exceeds the limit: the limit falls,
// latency does not, so after Settle the cut is undone and the latency
// becomes the baseline.
func TestAdaptiveUndoesACutThatDidNotHelp(t *testing.T) {
	cfg := testCfg
	cfg.Settle = 2 * time.Second
	a, clk := newAdaptive(t, cfg)
	for range 20 {
		tick(t, a, clk, 400, time.Millisecond, admission.Succeeded)
	}
	var cutAt time.Time
	for i := 0; a.Limit() == 256; i++ {
		if i == 5 {
			t.Fatal("limit did not fall at 100× the latency with demand over it")
		}
		tick(t, a, clk, 400, 100*time.Millisecond, admission.Succeeded)
		cutAt = clk.Now()
	}
	for clk.Now().Sub(cutAt) < cfg.Settle-100*time.Millisecond {
		tick(t, a, clk, 400, 100*time.Millisecond, admission.Succeeded)
		if a.Limit() == 256 {
			t.Fatalf("cut undone %v after it began, before Settle %v", clk.Now().Sub(cutAt), cfg.Settle)
		}
	}
	for range 3 {
		tick(t, a, clk, 400, 100*time.Millisecond, admission.Succeeded)
	}
	if a.Limit() != 256 || a.Baseline() != 100*time.Millisecond {
		t.Fatalf("limit %d baseline %v after Settle, want 256 100ms", a.Limit(), a.Baseline())
	}
	// Stays there: the latency is now the baseline.
	for range 100 {
		tick(t, a, clk, 400, 100*time.Millisecond, admission.Succeeded)
		checkBounds(t, a, 256, 256)
	}
	// Faster again: the baseline follows at once (once a window holds
	// only fast samples).
	for range 3 {
		clk.Advance(cfg.Window)
		tick(t, a, clk, 400, time.Millisecond, admission.Succeeded)
	}
	if a.Baseline() != time.Millisecond {
		t.Fatalf("baseline %v, want 1ms", a.Baseline())
	}
}

// psTick is tick for a CPU-bound server: latency grows with what is in
// flight (n × per).
func psTick(t tb, l admission.Limiter, clk *fakeClock, demand int, per time.Duration) {
	t.Helper()
	var held []admission.Token
	for range demand {
		tok, ok := l.Acquire()
		if !ok {
			break
		}
		held = append(held, tok)
	}
	clk.Advance(time.Duration(len(held)) * per)
	for i := range held {
		held[i].Release(admission.Succeeded)
	}
}

// Overload of a CPU-bound server: cutting the limit does bring latency
// down, so the cut stays as long as the overload does, and goes when it
// ends.
func TestAdaptiveKeepsACutThatHelped(t *testing.T) {
	cfg := testCfg
	cfg.Settle = 2 * time.Second
	a, clk := newAdaptive(t, cfg)
	for range 20 {
		psTick(t, a, clk, 10, 500*time.Microsecond) // 5ms at 10 in flight
	}
	for range 600 { // ≥ 10 s of 10× overload
		psTick(t, a, clk, 400, 500*time.Microsecond)
		checkBounds(t, a, 8, 256)
	}
	if l := a.Limit(); l > 32 {
		t.Fatalf("limit %d after 10 s of overload, want it held low (≤ 32)", l)
	}
	t.Logf("limit under overload %d, baseline %v", a.Limit(), a.Baseline())
	for range 100 {
		psTick(t, a, clk, 10, 500*time.Microsecond)
	}
	if l := a.Limit(); l != 256 {
		t.Fatalf("limit %d after the overload ended, want 256", l)
	}
}

func TestAdaptiveDropsHalve(t *testing.T) {
	a, clk := newAdaptive(t, testCfg)
	for range 10 {
		tick(t, a, clk, 400, time.Millisecond, admission.Succeeded)
	}
	// Same latency, but the requests missed their deadline.
	tick(t, a, clk, 400, time.Millisecond, admission.Dropped)
	clk.Advance(testCfg.Window)
	tick(t, a, clk, 400, time.Millisecond, admission.Succeeded) // closes the window
	if got, want := a.Limit(), 128+16; got != want {
		t.Fatalf("limit %d after a window with drops, want %d (256×0.5+√256)", got, want)
	}
}

func TestAdaptiveDropsUnderTheLimit(t *testing.T) {
	a, clk := newAdaptive(t, testCfg)
	for range 10 {
		tick(t, a, clk, 20, time.Millisecond, admission.Succeeded)
	}
	// Only 20 in flight, but they missed their deadline: starved. The limit
	// falls to what was in flight, halved, plus room to probe.
	tick(t, a, clk, 20, time.Millisecond, admission.Dropped)
	clk.Advance(testCfg.Window)
	tick(t, a, clk, 20, time.Millisecond, admission.Succeeded) // closes the window
	if got, want := a.Limit(), 14; got != want {
		t.Fatalf("limit %d after drops with 20 in flight, want %d (20×0.5+√20)", got, want)
	}
}

func TestAdaptiveIgnoredTeachesNothing(t *testing.T) {
	a, clk := newAdaptive(t, testCfg)
	for range 10 {
		tick(t, a, clk, 400, time.Millisecond, admission.Succeeded)
	}
	for range 100 {
		tick(t, a, clk, 400, time.Second, admission.Ignored)
	}
	if a.Limit() != 256 || a.Baseline() != time.Millisecond || a.Inflight() != 0 {
		t.Fatalf("limit %d baseline %v inflight %d after ignored samples, want 256 1ms 0", a.Limit(), a.Baseline(), a.Inflight())
	}
}

func TestAdaptiveWindowNeedsSamples(t *testing.T) {
	a, clk := newAdaptive(t, admission.AdaptiveConfig{Max: 32, Min: 4, Window: 10 * time.Millisecond, MinSamples: 50})
	tick(t, a, clk, 32, time.Millisecond, admission.Succeeded) // inside the first window
	tick(t, a, clk, 32, time.Millisecond, admission.Succeeded)
	clk.Advance(10 * time.Millisecond)
	tick(t, a, clk, 1, time.Millisecond, admission.Succeeded) // closes it: baseline 1ms
	if a.Baseline() != time.Millisecond || a.Limit() != 32 {
		t.Fatalf("baseline %v limit %d, want 1ms 32", a.Baseline(), a.Limit())
	}
	tick(t, a, clk, 40, time.Second, admission.Succeeded)
	if a.Limit() != 32 {
		t.Fatalf("limit %d moved on 32 samples, fewer than MinSamples 50", a.Limit())
	}
	tick(t, a, clk, 40, time.Second, admission.Succeeded) // the 50th sample closes the window
	if got := a.Limit(); got != 21 {
		t.Fatalf("limit %d, want one update to 21 (32×0.5+√32)", got)
	}
}

// Random sequences of acquires, releases and clock moves: the limit stays in
// [Min, Max], admission is exact (admitted iff fewer than Limit are held),
// and Inflight counts exactly the held tokens.
func TestPropertyAdaptive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		hi := rapid.IntRange(1, 64).Draw(t, "max")
		cfg := admission.AdaptiveConfig{
			Max:        hi,
			Min:        rapid.IntRange(1, hi).Draw(t, "min"),
			Tolerance:  rapid.Float64Range(1, 3).Draw(t, "tolerance"),
			Window:     time.Duration(rapid.IntRange(1, 50).Draw(t, "window_ms")) * time.Millisecond,
			MinSamples: rapid.IntRange(1, 8).Draw(t, "min_samples"),
			Settle:     time.Duration(rapid.IntRange(1, 3000).Draw(t, "settle_ms")) * time.Millisecond,
		}
		a, clk := newAdaptive(t, cfg)
		var held []admission.Token
		for range rapid.IntRange(1, 400).Draw(t, "steps") {
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0:
				lim := a.Limit()
				tok, ok := a.Acquire()
				if ok != (len(held) < lim) {
					t.Fatalf("acquire ok=%v with %d held, limit %d", ok, len(held), lim)
				}
				if ok {
					held = append(held, tok)
				}
			case 1:
				if len(held) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(held)-1).Draw(t, "which")
				held[i].Release(admission.Outcome(rapid.IntRange(0, 2).Draw(t, "outcome")))
				held = append(held[:i], held[i+1:]...)
			case 2:
				clk.Advance(time.Duration(rapid.IntRange(0, 200_000).Draw(t, "advance_us")) * time.Microsecond)
			}
			if got := a.Limit(); got < cfg.Min || got > cfg.Max {
				t.Fatalf("limit %d outside [%d, %d]", got, cfg.Min, cfg.Max)
			}
			if a.Inflight() != len(held) {
				t.Fatalf("inflight %d, %d held", a.Inflight(), len(held))
			}
		}
	})
}

// Fixed(n) is exactly the old counter: admitted iff fewer than n are held.
func TestPropertyFixed(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(-1, 16).Draw(t, "n")
		f := admission.Fixed(n)
		var held []admission.Token
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			if rapid.Bool().Draw(t, "acquire") {
				tok, ok := f.Acquire()
				if ok != (len(held) < n) {
					t.Fatalf("Fixed(%d): acquire ok=%v with %d held", n, ok, len(held))
				}
				if ok {
					held = append(held, tok)
				}
			} else if len(held) > 0 {
				held[len(held)-1].Release(admission.Outcome(rapid.IntRange(0, 2).Draw(t, "outcome")))
				held = held[:len(held)-1]
			}
			if f.Inflight() != len(held) {
				t.Fatalf("inflight %d, %d held", f.Inflight(), len(held))
			}
		}
	})
}

// Many goroutines acquire and release while the clock runs and the limit
// moves: never more holders than Max, never more than the limit at the
// moment of admission plus racing refusals, and every count back to 0.
func TestConcurrentAcquireRelease(t *testing.T) {
	a, clk := newAdaptive(t, admission.AdaptiveConfig{Max: 32, Min: 4, Window: time.Millisecond, MinSamples: 4})
	for name, l := range map[string]admission.Limiter{"fixed": admission.Fixed(32), "adaptive": a} {
		t.Run(name, func(t *testing.T) {
			const workers, iters = 16, 3000
			var holders, peak atomic.Int64
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(w), 1))
					for range iters {
						tok, ok := l.Acquire()
						if !ok {
							continue
						}
						h := holders.Add(1)
						for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
						}
						if lim := l.Limit(); lim < 1 || lim > 32 {
							t.Errorf("limit %d outside [1, 32]", lim)
						}
						runtime.Gosched() // let others overlap this holder
						// Slow releases when the sample says so, so the
						// adaptive limit really moves both ways.
						clk.Advance(time.Duration(r.IntN(200)) * time.Microsecond)
						holders.Add(-1)
						tok.Release(admission.Outcome(r.IntN(3)))
						tok.Release(admission.Succeeded) // no-op
					}
				})
			}
			wg.Wait()
			if p := peak.Load(); p > 32 {
				t.Fatalf("%d holders at once over Max 32", p)
			}
			if n := l.Inflight(); n != 0 {
				t.Fatalf("inflight %d after every release", n)
			}
			t.Logf("peak holders %d, final limit %d", peak.Load(), l.Limit())
		})
	}
}

func TestZeroAllocs(t *testing.T) {
	a, _ := newAdaptive(t, admission.AdaptiveConfig{Max: 1 << 20, MinSamples: 1, Window: 1})
	for name, l := range map[string]admission.Limiter{"fixed": admission.Fixed(1 << 20), "adaptive": a} {
		if n := testing.AllocsPerRun(1000, func() {
			tok, ok := l.Acquire()
			if !ok {
				t.Fatal("refused")
			}
			defer func() { tok.Release(admission.Succeeded) }()
		}); n != 0 {
			t.Errorf("%s: %v allocations per acquire/release", name, n)
		}
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	adaptive, err := admission.Adaptive(admission.AdaptiveConfig{Max: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		l    admission.Limiter
	}{{"fixed", admission.Fixed(1 << 20)}, {"adaptive", adaptive}} {
		b.Run(bc.name+"/sequential", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tok, _ := bc.l.Acquire()
				tok.Release(admission.Succeeded)
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					tok, _ := bc.l.Acquire()
					tok.Release(admission.Succeeded)
				}
			})
		})
	}
}
