package resilience

import (
	"context"
	"errors"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// drawRate draws calls/s log-uniformly from 20 to 2000, so quiet traffic
// (where a trip has the fewest calls to go on) is tried as often as busy.
func drawRate(t *rapid.T) float64 {
	return math.Exp(rapid.Float64Range(math.Log(20), math.Log(2000)).Draw(t, "log_rate"))
}

// A hung or hard-failing dependency is short-circuited within 1 s of its
// first failing call, at any rate from 20 to 2000 calls/s and any bulkhead
// size, and never before the fault begins.
func TestPropertyFaultOpensWithinASecond(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rate := drawRate(t)
		hang := rapid.Bool().Draw(t, "hang")
		onset := time.Duration(rapid.IntRange(500, 4000).Draw(t, "onset_ms")) * time.Millisecond
		capacity := rapid.IntRange(10, 1000).Draw(t, "bulkhead")
		seed := rapid.Uint64().Draw(t, "seed")
		cfg := Config{Bulkhead: BulkheadConfig{MaxConcurrent: capacity}}
		r := simulate(cfg, rate, onset+2*time.Second, seed, faultAt(onset, 0, hang))
		if len(r.opens) == 0 {
			t.Fatalf("never opened (%.0f calls/s, first failure at %v)", rate, r.firstBad)
		}
		if r.opens[0] < onset {
			t.Fatalf("opened at %v, before the fault began at %v", r.opens[0], onset)
		}
		if took := r.opens[0] - r.firstBad; took > time.Second {
			t.Fatalf("%.0f calls/s: opened %v after the first failing call", rate, took)
		}
	})
}

// Noise never opens the breaker: 2 % errors, ±30 ms jitter, or 5 % of calls
// stalling until the 500 ms sub-budget cuts them off.
func TestPropertyNoiseNeverOpens(t *testing.T) {
	models := []model{noiseErrors, noiseJitter, noiseStalls}
	names := []string{"2% errors", "±30ms jitter", "5% stalls"}
	rapid.Check(t, func(t *rapid.T) {
		rate := drawRate(t)
		i := rapid.IntRange(0, len(models)-1).Draw(t, "model")
		capacity := rapid.IntRange(50, 1000).Draw(t, "bulkhead")
		seed := rapid.Uint64().Draw(t, "seed")
		// About 10k calls per case keeps a hundred cases quick; the long
		// runs are TestDetectionFigures'.
		dur := time.Duration(min(30, max(3, 10000/rate)) * float64(time.Second))
		r := simulate(Config{Bulkhead: BulkheadConfig{MaxConcurrent: capacity}}, rate, dur, seed, models[i])
		if len(r.opens) > 0 {
			t.Fatalf("%s at %.0f calls/s opened the breaker at %v", names[i], rate, r.opens[0])
		}
	})
}

// The checks above can fail: a trip of 3 in a row opens on 5 % stalls, and
// the window alone (the old behaviour) takes seconds to see a hang.
func TestDetectionChecksCanFail(t *testing.T) {
	r := simulate(Config{Breaker: BreakerConfig{ConsecutiveFailures: 2}, Bulkhead: BulkheadConfig{MaxConcurrent: 400}}, 2000, 10*time.Second, 1, noiseStalls)
	if len(r.opens) == 0 {
		t.Fatal("a trip of 2 in a row survived 5% stalls at 2000 calls/s: the noise check could not fail")
	}
	old := Config{Breaker: BreakerConfig{ConsecutiveFailures: 1 << 30}}
	r = simulate(old, 200, 30*time.Second, 1, faultAt(10*time.Second, 0, true))
	if len(r.opens) == 0 || r.opens[0]-r.firstBad <= time.Second {
		t.Fatalf("the window alone opened at %v, first timeout %v: the detection check could not fail", r.opens, r.firstBad)
	}
	t.Logf("window alone (the old rule), 200 calls/s, hang after 10 s healthy: opened %v after the first timeout", r.opens[0]-r.firstBad)
}

// TestDetectionFigures measures the figures the documentation quotes: time
// to open at 20, 200 and 2000 calls/s, and opens under each noise model over
// a minute of simulated traffic per rate.
func TestDetectionFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("long simulation")
	}
	for _, rate := range []float64{20, 200, 2000} {
		for _, hang := range []bool{true, false} {
			onset := 10 * time.Second
			worst, sum := time.Duration(0), time.Duration(0)
			const seeds = 20
			for seed := range uint64(seeds) {
				r := simulate(simCfg(50), rate, onset+2*time.Second, seed, faultAt(onset, 0, hang))
				if len(r.opens) == 0 || r.opens[0] < onset {
					t.Fatalf("rate %v hang %v seed %d: opens %v", rate, hang, seed, r.opens)
				}
				took := r.opens[0] - r.firstBad
				if took > time.Second {
					t.Fatalf("rate %v hang %v seed %d: opened %v after the first failure", rate, hang, seed, took)
				}
				worst, sum = max(worst, took), sum+took
			}
			kind := "hard failure"
			if hang {
				kind = "hang (first timeout 500ms after onset)"
			}
			t.Logf("%4.0f calls/s, %s, bulkhead 50: opened after the first failing call in mean %v, worst %v (%d seeds)",
				rate, kind, (sum / seeds).Round(time.Millisecond), worst.Round(time.Millisecond), seeds)
		}
	}
	// Poisson arrivals at 20 calls/s: a lull can leave fewer than ten
	// calls in the second after the first timeout. How often, and how late?
	const runs = 500
	late, worst := 0, time.Duration(0)
	for seed := range uint64(runs) {
		r := simulateArrivals(simCfg(20), 20, 12*time.Second, seed, faultAt(10*time.Second, 0, true), true)
		if len(r.opens) == 0 {
			late++
			continue
		}
		took := r.opens[0] - r.firstBad
		if took > time.Second {
			late++
		}
		worst = max(worst, took)
	}
	t.Logf("  20 calls/s Poisson, hang: %d of %d runs opened more than 1 s after the first timeout; worst %v", late, runs, worst.Round(time.Millisecond))
	models := map[string]model{"2% errors": noiseErrors, "±30ms jitter": noiseJitter, "5% stalls to 500ms": noiseStalls}
	for name, m := range models {
		for _, rate := range []float64{20, 200, 2000} {
			dur := 60 * time.Second
			if v, err := strconv.Atoi(os.Getenv("RESILIENCE_SIM_SECONDS")); err == nil && v > 0 {
				dur = time.Duration(v) * time.Second // longer runs on demand
			}
			r := simulate(simCfg(rate), rate, dur, 7, m)
			if len(r.opens) > 0 {
				t.Fatalf("%s at %v calls/s opened at %v", name, rate, r.opens[0])
			}
			t.Logf("%-20s %4.0f calls/s: 0 opens over %v simulated (%d calls)", name, rate, dur, r.calls)
		}
	}
}

// While the dependency stays sick a probe goes out every sleep window
// (0.5 s); once it heals, the next probe closes the breaker and full pages
// are back at once (well within 2 s of that probe).
func TestProbeSleepAndRecovery(t *testing.T) {
	const rate = 200
	onset, heal := 2*time.Second, 20*time.Second
	r := simulate(simCfg(rate), rate, 30*time.Second, 3, faultAt(onset, heal, true))
	var sleeps []time.Duration
	var openedAt time.Duration
	probeAfterHeal := time.Duration(-1)
	closedAt := time.Duration(-1)
	for _, c := range r.changes {
		at := c.At.Sub(r.start)
		switch {
		case c.To == StateOpen:
			openedAt = at
		case c.To == StateHalfOpen:
			sleeps = append(sleeps, (at - openedAt).Truncate(100*time.Millisecond))
			if at >= heal && probeAfterHeal < 0 {
				probeAfterHeal = at
			}
		case c.To == StateClosed && at >= heal && closedAt < 0:
			closedAt = at
		}
	}
	// A probe starts with the first call after the sleep: within one
	// arrival gap (≤ 7.5 ms at 200 calls/s), hence the truncation.
	if len(sleeps) < 2 {
		t.Fatalf("sleeps %v, want a probe every 500ms", sleeps)
	}
	for _, d := range sleeps {
		if d != 500*time.Millisecond {
			t.Fatalf("sleeps %v, want 500ms each", sleeps)
		}
	}
	if probeAfterHeal < 0 || closedAt < 0 || closedAt-probeAfterHeal > 2*time.Second {
		t.Fatalf("healed at %v: probe at %v, closed at %v", heal, probeAfterHeal, closedAt)
	}
	full := closedAt
	for _, c := range r.all {
		if c.start >= full && c.kind != KindSuccess && c.end <= 30*time.Second {
			t.Fatalf("call at %v after the close at %v: %v", c.start, closedAt, c.kind)
		}
	}
	t.Logf("sleeps between probes %v; healed at %v, probe at %v, closed at %v (full pages %v after the probe)",
		sleeps, heal, probeAfterHeal, closedAt, closedAt-probeAfterHeal)
}

// Every opening sleeps the sleep window, however soon after the last close.
func TestSleepIsTheSleepWindow(t *testing.T) {
	clk := newFakeClock()
	g := mustGuard(t, Config{
		Breaker: BreakerConfig{ConsecutiveFailures: 2, MinRequests: 1 << 20},
		Retry:   RetryConfig{MaxAttempts: 1},
	}, WithClock(clk))
	ctx := context.Background()
	trip := func() {
		t.Helper()
		Do(ctx, g, fail)
		Do(ctx, g, fail)
		if s := g.breaker.reported(); s != StateOpen {
			t.Fatalf("state %v, want OPEN", s)
		}
	}
	// sleepIs checks the breaker stays shut until d has passed, then probes
	// (and the probe, a success, closes it).
	sleepIs := func(d time.Duration) {
		t.Helper()
		clk.Advance(d - time.Millisecond)
		if _, err := Do(ctx, g, ok); !errors.Is(err, ErrShortCircuited) {
			t.Fatalf("probed before %v: %v", d, err)
		}
		clk.Advance(time.Millisecond)
		if _, err := Do(ctx, g, ok); err != nil {
			t.Fatalf("no probe after %v: %v", d, err)
		}
		if s := g.breaker.reported(); s != StateClosed {
			t.Fatalf("state %v after a good probe", s)
		}
	}
	trip()
	sleepIs(500 * time.Millisecond)
	clk.Advance(time.Second) // well within the window of the last close
	trip()
	sleepIs(500 * time.Millisecond)
}

// The run counts failures and timeouts; an answer (success or bad request)
// ends it; a call the caller gave up on neither extends nor ends it.
func TestConsecutiveFailuresTrip(t *testing.T) {
	clk := newFakeClock()
	g := mustGuard(t, Config{
		Breaker: BreakerConfig{MinRequests: 1 << 20}, // the window stays out of it
		Retry:   RetryConfig{MaxAttempts: 1},
	}, WithClock(clk))
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for range 9 {
		Do(ctx, g, fail)
	}
	Do(ctx, g, badReq)
	for range 9 {
		Do(ctx, g, fail)
		Do(cancelled, g, fail)
	}
	if s := g.breaker.reported(); s != StateClosed {
		t.Fatalf("opened on runs of 9: %v", s)
	}
	Do(ctx, g, fail)
	if s := g.breaker.reported(); s != StateOpen {
		t.Fatalf("state %v after 10 failures in a row, want OPEN", s)
	}
}
