package resilience

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestTimeoutMinWithinTimeoutMax(t *testing.T) {
	bad := Config{AutoTimeout: true, Timeout: 100 * time.Millisecond, TimeoutMin: 200 * time.Millisecond}
	if err := bad.WithDefaults().Validate(); err == nil || !containsKey(err.Error(), "timeout_min") {
		t.Errorf("timeout_min above the ceiling: %v", err)
	}
}

// adaptRig drives an adaptive logistics guard one simulated second at a
// time: the second's calls, then a call through Do (which is where the
// sub-budget adapts), then the sub-budget in force.
type adaptRig struct {
	t   *testing.T
	clk *fakeClock
	rec *recorder
	g   *Guard
}

func newAdaptRig(t *testing.T, cfg Config) *adaptRig {
	clk := newFakeClock()
	rec := &recorder{}
	return &adaptRig{t, clk, rec, mustGuard(t, cfg, WithClock(clk), WithListener(rec))}
}

func (r *adaptRig) second(calls func(g *Guard)) time.Duration {
	r.clk.Advance(time.Second)
	calls(r.g)
	ran := false
	var budget time.Duration
	Do(context.Background(), r.g, func(ctx context.Context) (string, error) {
		dl, _ := ctx.Deadline()
		ran, budget = true, dl.Sub(r.clk.Now())
		return "ok", nil
	})
	to := time.Duration(r.g.Snapshot().Timeout)
	if ran && budget != to { // not ran: short-circuited
		r.t.Fatalf("the call ran under a sub-budget of %v, the snapshot says %v", budget, to)
	}
	return to
}

// healthy is one second of the baseline: 200 calls, 1 % at 40 ms.
func healthy(lat time.Duration) func(*Guard) {
	return func(g *Guard) {
		feed(g, 198, KindSuccess, lat)
		feed(g, 2, KindSuccess, 2*lat)
	}
}

func TestAdaptiveTimeout(t *testing.T) {
	logistics := Config{Timeout: 500 * time.Millisecond, AutoTimeout: true}

	t.Run("converges smoothly and holds", func(t *testing.T) {
		r := newAdaptRig(t, logistics)
		var seq []time.Duration
		for range 12 {
			seq = append(seq, r.second(healthy(20*time.Millisecond)))
		}
		// Rule: max(3×20.5, 2×41) + 50 = 132 ms; at most 25 % a second.
		want := "[375ms 281ms 211ms 158ms 132ms 132ms 132ms 132ms 132ms 132ms 132ms 132ms]"
		if got := fmt.Sprint(seq); got != want {
			t.Fatalf("sub-budget by second %s, want %s", got, want)
		}
		r.rec.mu.Lock()
		defer r.rec.mu.Unlock()
		if len(r.rec.timeouts) != 5 || r.rec.timeouts[0].From != 500*time.Millisecond || r.rec.timeouts[4].To != 132*time.Millisecond {
			t.Fatalf("timeout events %+v", r.rec.timeouts)
		}
	})

	t.Run("a hang never raises it", func(t *testing.T) {
		r := newAdaptRig(t, logistics)
		for range 8 {
			r.second(healthy(20 * time.Millisecond))
		}
		settled := time.Duration(r.g.Snapshot().Timeout)
		for i := range 30 {
			got := r.second(func(g *Guard) { feed(g, 50, KindTimeout, settled) })
			if got > settled {
				t.Fatalf("second %d of a hang: sub-budget rose to %v from %v", i, got, settled)
			}
		}
		// Forced closed, the timeouts dominate: still no rise.
		r.g.ForceBreaker(ForceClosed)
		for range 15 {
			if got := r.second(func(g *Guard) { feed(g, 50, KindTimeout, settled) }); got > settled {
				t.Fatalf("forced closed, failures dominating: rose to %v", got)
			}
		}
	})

	t.Run("follows a slow shift within its bounds", func(t *testing.T) {
		r := newAdaptRig(t, logistics)
		for range 8 {
			r.second(healthy(20 * time.Millisecond))
		}
		prev := time.Duration(r.g.Snapshot().Timeout)
		var got time.Duration
		for range 20 {
			got = r.second(healthy(100 * time.Millisecond))
			if got < prev || float64(got) > 1.25*float64(prev)+float64(time.Millisecond) {
				t.Fatalf("moved from %v to %v in a second", prev, got)
			}
			prev = got
		}
		// max(3×102, 2×205) + 50 ≈ 460 ms, within the 500 ms ceiling.
		if got < 410*time.Millisecond || got > 500*time.Millisecond {
			t.Fatalf("settled at %v after the shift", got)
		}
		for range 20 {
			got = r.second(healthy(200 * time.Millisecond))
		}
		if got != 500*time.Millisecond {
			t.Fatalf("rule above the ceiling: %v, want timeout_max (= timeout) 500ms", got)
		}
	})
}

func TestAdaptiveTimeoutBounds(t *testing.T) {
	t.Run("pinned at timeout_max", func(t *testing.T) {
		cfg := Config{Timeout: 500 * time.Millisecond, TimeoutMax: 800 * time.Millisecond, AutoTimeout: true}
		r := newAdaptRig(t, cfg)
		var got time.Duration
		for range 10 {
			// Rule: max(3×300, 2×600) + 50 = 1250 ms, above the ceiling.
			got = r.second(healthy(300 * time.Millisecond))
		}
		s := r.g.Snapshot()
		if got != 800*time.Millisecond || s.TimeoutMode != "auto" || dur(s.TimeoutMax) != 800*time.Millisecond || dur(s.TimeoutMin) != 10*time.Millisecond {
			t.Fatalf("settled at %v, snapshot %v %v [%v, %v]; want 800ms", got, dur(&s.Timeout), s.TimeoutMode, dur(s.TimeoutMin), dur(s.TimeoutMax))
		}
	})

	t.Run("a fixed timeout shows no bounds", func(t *testing.T) {
		g := mustGuard(t, Config{Timeout: 300 * time.Millisecond}, WithClock(newFakeClock()))
		if s := g.Snapshot(); s.TimeoutMode != "fixed" || s.TimeoutMin != nil || s.TimeoutMax != nil || dur(&s.Timeout) != 300*time.Millisecond {
			t.Fatalf("fixed: %+v", s)
		}
	})

	t.Run("one step up", func(t *testing.T) {
		r := newAdaptRig(t, Config{Timeout: 100 * time.Millisecond, TimeoutMax: time.Second, AutoTimeout: true})
		to := r.second(healthy(60 * time.Millisecond)) // rule ≈ 290 ms: one 25 % step
		if to != 125*time.Millisecond {
			t.Fatalf("after one step: %v", to)
		}
	})

	t.Run("censored successes do not shrink it", func(t *testing.T) {
		r := newAdaptRig(t, Config{Timeout: 500 * time.Millisecond, AutoTimeout: true})
		// 1 % of calls cut at the sub-budget: the successes' tail (40 ms)
		// says 132 ms, but the calls that timed out are slower than that.
		cut := func(g *Guard) {
			healthy(20 * time.Millisecond)(g)
			feed(g, 2, KindTimeout, 500*time.Millisecond)
		}
		for i := range 15 {
			if got := r.second(cut); got != 500*time.Millisecond {
				t.Fatalf("second %d: shrank to %v while 1 %% of calls time out", i, got)
			}
		}
		// The same successes without the timeouts: it shrinks.
		var got time.Duration
		for range 15 {
			got = r.second(healthy(20 * time.Millisecond))
		}
		if got != 132*time.Millisecond {
			t.Fatalf("after the timeouts aged out: %v, want 132ms", got)
		}
	})

	t.Run("switching modes", func(t *testing.T) {
		cfg := Config{Timeout: 500 * time.Millisecond, AutoTimeout: true}
		r := newAdaptRig(t, cfg)
		for range 8 {
			r.second(healthy(20 * time.Millisecond))
		}
		learnt := time.Duration(r.g.Snapshot().Timeout)
		// New bounds keep what was learnt, brought within them.
		cfg.TimeoutMin = 200 * time.Millisecond
		if err := r.g.Reconfigure(cfg); err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(r.g.Snapshot().Timeout); learnt >= 200*time.Millisecond || got != 200*time.Millisecond {
			t.Fatalf("learnt %v, after timeout_min 200ms: %v", learnt, got)
		}
		// Back to fixed, then auto again: it starts over from timeout.
		fixed := cfg
		fixed.AutoTimeout, fixed.Timeout = false, 300*time.Millisecond
		if err := r.g.Reconfigure(fixed); err != nil {
			t.Fatal(err)
		}
		if s := r.g.Snapshot(); s.TimeoutMode != "fixed" || dur(&s.Timeout) != 300*time.Millisecond {
			t.Fatalf("fixed: %v %v", dur(&s.Timeout), s.TimeoutMode)
		}
		fixed.AutoTimeout = true
		if err := r.g.Reconfigure(fixed); err != nil {
			t.Fatal(err)
		}
		if s := r.g.Snapshot(); s.TimeoutMode != "auto" || dur(&s.Timeout) != 300*time.Millisecond {
			t.Fatalf("auto again: %v %v, want to start from 300ms", dur(&s.Timeout), s.TimeoutMode)
		}
	})
}

// dur is a snapshot's duration, 0 for nil.
func dur(m *Millis) time.Duration {
	if m == nil {
		return 0
	}
	return time.Duration(*m)
}
