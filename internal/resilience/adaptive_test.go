package resilience

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestTimeoutSetting(t *testing.T) {
	for in, want := range map[string]TimeoutSetting{
		"auto": {Auto: true}, "AUTO": {Auto: true}, "300ms": {Fixed: 300 * time.Millisecond},
	} {
		var got TimeoutSetting
		if err := got.UnmarshalText([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %+v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "fast", "-1s", "0s"} {
		var got TimeoutSetting
		if err := got.UnmarshalText([]byte(in)); err == nil {
			t.Errorf("%q accepted as %+v", in, got)
		}
	}
	var y TimeoutSetting
	if err := y.UnmarshalYAML(func(v any) error { *(v.(*string)) = "auto"; return nil }); err != nil || !y.Auto {
		t.Errorf("yaml auto: %+v %v", y, err)
	}
	c := Config{Timeout: 500 * time.Millisecond}
	TimeoutSetting{Auto: true}.Apply(&c)
	if !c.AutoTimeout || c.Timeout != 500*time.Millisecond {
		t.Errorf("auto applied: %+v", c)
	}
	if b, _ := c.TimeoutSetting().MarshalText(); string(b) != "auto" {
		t.Errorf("marshal %s", b)
	}
	TimeoutSetting{Fixed: time.Second}.Apply(&c)
	if c.AutoTimeout || c.Timeout != time.Second {
		t.Errorf("fixed applied: %+v", c)
	}
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
	budget := time.Duration(-1)
	Do(context.Background(), r.g, func(ctx context.Context) (string, error) {
		dl, _ := ctx.Deadline()
		budget = time.Until(dl)
		return "ok", nil
	})
	to := r.g.Snapshot(0).Timeout
	if budget >= 0 && (budget > to || budget < to-100*time.Millisecond) { // -1: short-circuited
		r.t.Fatalf("the call ran under %v, the snapshot says %v", budget, to)
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
		settled := r.g.Snapshot(0).Timeout
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
		prev := r.g.Snapshot(0).Timeout
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

// The config layer can read the key with yaml and with encoding/json.
func TestTimeoutSettingDecodes(t *testing.T) {
	var doc struct {
		A TimeoutSetting `yaml:"a" json:"a"`
		B TimeoutSetting `yaml:"b" json:"b"`
	}
	if err := yaml.Unmarshal([]byte("a: auto\nb: 300ms\n"), &doc); err != nil || !doc.A.Auto || doc.B.Fixed != 300*time.Millisecond {
		t.Fatalf("yaml: %+v %v", doc, err)
	}
	if err := yaml.Unmarshal([]byte("a: [1]\n"), &doc); err == nil {
		t.Fatal("yaml: a list accepted")
	}
	doc.A, doc.B = TimeoutSetting{}, TimeoutSetting{}
	if err := json.Unmarshal([]byte(`{"a":"auto","b":"1s"}`), &doc); err != nil || !doc.A.Auto || doc.B.Fixed != time.Second {
		t.Fatalf("json: %+v %v", doc, err)
	}
	if out, err := json.Marshal(doc); err != nil || string(out) != `{"a":"auto","b":"1s"}` {
		t.Fatalf("json out %s %v", out, err)
	}
}
