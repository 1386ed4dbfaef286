package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// NewResilienceReport lists the guards in the order given, each with its breaker, counts,
// bulkhead and settings in the contract's units, and never a null list.
func TestNewResilienceReport(t *testing.T) {
	a, err := resilience.New("order", resilience.Config{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b, err := resilience.New("cache", resilience.Config{Timeout: 50 * time.Millisecond, Bulkhead: resilience.BulkheadConfig{MaxConcurrent: 7}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = resilience.Do(ctx, a, func(context.Context) (int, error) { return 1, nil })
	_, _ = resilience.Do(ctx, a, func(context.Context) (int, error) { return 0, errors.New("boom") })
	b.ForceBreaker(resilience.ForceOpen)

	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	r := NewResilienceReport(now, 1500*time.Millisecond, []*resilience.Guard{a, b})
	if !r.GeneratedAt.Equal(now) || r.GeneratedAt.Location() != time.UTC || r.DeadlineMS != 1500 {
		t.Errorf("header = %v %v", r.GeneratedAt, r.DeadlineMS)
	}
	if len(r.Dependencies) != 2 || r.Dependencies[0].Name != "order" || r.Dependencies[1].Name != "cache" {
		t.Fatalf("dependencies = %+v", r.Dependencies)
	}
	o, c := r.Dependencies[0], r.Dependencies[1]
	if o.Breaker != resilience.StateClosed || o.Counts["success"] != 1 || o.Counts["failure"] < 1 || o.Timeout != resilience.Millis(300*time.Millisecond) {
		t.Errorf("order = %+v", o)
	}
	if c.Breaker != resilience.StateForcedOpen || c.Bulkhead.Capacity != 7 || c.Bulkhead.InUse != 0 || c.Timeout != resilience.Millis(50*time.Millisecond) {
		t.Errorf("cache = %+v", c)
	}
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Dependencies []map[string]any `json:"dependencies"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, d := range doc.Dependencies {
		if v, ok := d["recommended_timeout_ms"]; !ok || v != nil {
			t.Errorf("%v: recommended_timeout_ms %v (present %v), want null", d["name"], v, ok)
		}
	}
}

// recommended_timeout_ms is null (the key present) while a dependency has too
// few successful calls, e.g. the only one timed out; then a whole number of
// milliseconds from the successes alone.
func TestRecommendedTimeoutNullThenWholeMilliseconds(t *testing.T) {
	g, err := resilience.New("logistics", resilience.Config{Timeout: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hang := func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }
	if _, err := resilience.Do(context.Background(), g, hang); !errors.Is(err, resilience.ErrTimeout) {
		t.Fatalf("err %v", err)
	}
	field := func() any {
		raw, err := json.Marshal(NewResilienceReport(time.Now(), 1500*time.Millisecond, []*resilience.Guard{g}))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Dependencies []map[string]any `json:"dependencies"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		v, ok := doc.Dependencies[0]["recommended_timeout_ms"]
		if !ok {
			t.Fatal("recommended_timeout_ms missing")
		}
		return v
	}
	if v := field(); v != nil {
		t.Fatalf("after one timed-out call: recommended_timeout_ms %v, want null", v)
	}
	if err := g.Reconfigure(resilience.Config{Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	for range resilience.AdvisorMinSuccesses {
		resilience.Do(context.Background(), g, func(context.Context) (int, error) { return 1, nil })
	}
	v, ok := field().(float64)
	if !ok || v <= 0 || v != float64(int64(v)) {
		t.Fatalf("recommended_timeout_ms %v, want a whole number of ms", field())
	}
}

// timeout_mode says whether timeout_ms is fixed or learnt, and an auto
// sub-budget shows its bounds (null when fixed); a change of mode shows at
// once.
func TestTimeoutMode(t *testing.T) {
	g, err := resilience.New("logistics", resilience.Config{Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	doc := func() map[string]any {
		raw, err := json.Marshal(NewResilienceReport(time.Now(), 1500*time.Millisecond, []*resilience.Guard{g}))
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Dependencies []map[string]any `json:"dependencies"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		return d.Dependencies[0]
	}
	d := doc()
	if d["timeout_mode"] != "fixed" || d["timeout_ms"] != 500.0 || d["timeout_min_ms"] != nil || d["timeout_max_ms"] != nil {
		t.Fatalf("fixed: %v %v [%v, %v]", d["timeout_mode"], d["timeout_ms"], d["timeout_min_ms"], d["timeout_max_ms"])
	}
	if _, ok := d["timeout_max_ms"]; !ok {
		t.Fatal("timeout_max_ms left out; want null")
	}
	if err := g.Reconfigure(resilience.Config{Timeout: 500 * time.Millisecond, AutoTimeout: true, TimeoutMin: 50 * time.Millisecond, TimeoutMax: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	d = doc()
	if d["timeout_mode"] != "auto" || d["timeout_ms"] != 500.0 || d["timeout_min_ms"] != 50.0 || d["timeout_max_ms"] != 2000.0 {
		t.Fatalf("auto: %v %v [%v, %v]", d["timeout_mode"], d["timeout_ms"], d["timeout_min_ms"], d["timeout_max_ms"])
	}
}
