package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/orderagg/orderagg/internal/config"
)

// The built-in bulkheads never refuse a call that admission let in, at any
// --max-inflight: each is exactly the pages admitted times the slots a page
// holds (so no default is larger than it needs to be either).
func TestDefaultBulkheadsFollowMaxInflight(t *testing.T) {
	for _, m := range []int{1, 16, 64, config.DefaultMaxInflight, 5000} {
		d := config.DefaultDependenciesFor(m)
		if u := d.Undersized(m); len(u) != 0 {
			t.Errorf("max-inflight %d: built-in bulkheads undersized: %v", m, u)
		}
		for _, name := range d.Names() {
			dep, _ := d.Get(name)
			want := m
			if name == config.NameCache {
				want = sections(d) * m // a last-good read per section, all at once
			}
			if dep.Bulkhead.MaxConcurrent != want || d.MinBulkhead(name, m) != want {
				t.Errorf("max-inflight %d: %s bulkhead %d, MinBulkhead %d, want %d", m, name, dep.Bulkhead.MaxConcurrent, d.MinBulkhead(name, m), want)
			}
		}
		if err := d.Validate(config.DefaultServe().Bounds()); err != nil {
			t.Errorf("max-inflight %d: %v", m, err)
		}
	}
	if d := config.DefaultDependencies(); len(d.Undersized(config.DefaultServe().MaxInflight)) != 0 {
		t.Error("DefaultDependencies does not fit DefaultServe's --max-inflight")
	}
}

func TestUndersizedNamesEachShortBulkhead(t *testing.T) {
	d := config.DefaultDependenciesFor(100)
	d.Update("logistics", func(x *config.Dependency) { x.Bulkhead.MaxConcurrent = 50 })
	// A hedge takes a second slot beside its call: the same 100 no longer do.
	d.Update("coupon", func(x *config.Dependency) { x.Hedge.Enabled = true })
	cacheNeed := sections(d) * 100
	d.Update("cache", func(x *config.Dependency) { x.Bulkhead.MaxConcurrent = cacheNeed - 1 })
	got := d.Undersized(100)
	want := []config.Undersized{
		{Dependency: "coupon", Have: 100, Need: 200, MaxInflight: 100},
		{Dependency: "logistics", Have: 50, Need: 100, MaxInflight: 100},
		{Dependency: "cache", Have: cacheNeed - 1, Need: cacheNeed, MaxInflight: 100},
	}
	if len(got) != len(want) {
		t.Fatalf("Undersized = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Undersized[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if key := got[1].Key(); key != "dependencies.logistics.bulkhead.max_concurrent" {
		t.Errorf("Key() = %q", key)
	}
	if n := d.MinBulkhead("payment", 10); n != 0 {
		t.Errorf("MinBulkhead of an unknown name = %d", n)
	}
}

// --max-inflight sizes the bulkheads a --config file leaves out; one it
// sets is kept, and reported when it is too small.
func TestMaxInflightSizesBulkheadsTheFileLeavesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deps.yaml")
	if err := os.WriteFile(path, []byte("dependencies:\n  coupon:\n    bulkhead:\n      max_concurrent: 300\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := config.ParseServeArgs([]string{"--max-inflight", "2000", "--config", path})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"order": 2000, "inventory": 2000, "coupon": 300, "logistics": 2000, config.NameCache: sections(s.Dependencies) * 2000} {
		if got := must(s.Dependencies, name).Bulkhead.MaxConcurrent; got != want {
			t.Errorf("%s bulkhead = %d, want %d", name, got, want)
		}
	}
	u := s.Dependencies.Undersized(s.MaxInflight)
	if len(u) != 1 || u[0].Dependency != "coupon" || u[0].Need != 2000 {
		t.Errorf("Undersized = %v, want coupon's 300 < 2000 alone", u)
	}
	// A reload runs the same code: a key removed from the file returns to
	// the size --max-inflight gives it.
	if err := os.WriteFile(path, []byte("dependencies: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deps, err := s.LoadDependencies()
	if err != nil {
		t.Fatal(err)
	}
	if got := must(deps, "coupon").Bulkhead.MaxConcurrent; got != 2000 {
		t.Errorf("coupon bulkhead after reload = %d, want 2000", got)
	}
	if _, err := config.ParseServeArgs([]string{"--max-inflight", "2000000"}); err == nil {
		t.Error("--max-inflight 2000000 accepted: the bulkheads and connection pools are multiples of it")
	}
}

// sections counts the page's sections: every dependency but the cache, whose
// bulkhead holds one last-good read of each. Counted from the names, so a
// registered downstream needs no edit here.
func sections(d config.Dependencies) int { return len(d.Names()) - 1 }
