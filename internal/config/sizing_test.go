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
		for _, name := range d.Names() {
			dep, _ := d.Get(name)
			want := m
			if name == config.NameCache {
				want = sections(d) * m // a last-good read per section, all at once
			}
			if dep.Bulkhead.MaxConcurrent != want {
				t.Errorf("max-inflight %d: %s bulkhead %d, want %d", m, name, dep.Bulkhead.MaxConcurrent, want)
			}
		}
		if err := d.Validate(config.DefaultServe().Bounds()); err != nil {
			t.Errorf("max-inflight %d: %v", m, err)
		}
	}
	if d := config.DefaultDependencies(); must(d, "order").Bulkhead.MaxConcurrent != config.DefaultServe().MaxInflight {
		t.Error("DefaultDependencies does not fit DefaultServe's --max-inflight")
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
