package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/config"
)

var bounds = config.DefaultServe().Bounds() // 1500ms, 100ms

func TestDefaultDependenciesAreValid(t *testing.T) {
	d := config.DefaultDependencies()
	if err := d.Validate(bounds); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Names(), append([]string{"order", "inventory", "coupon", "logistics"}, d.Names()[4:]...)) || d.Names()[len(d.Names())-1] != config.NameCache {
		t.Errorf("Names() = %v: the page's order, then cache", d.Names())
	}
	for _, name := range d.Names() {
		dep := must(d, name)
		if dep.Config != dep.Config.WithDefaults() {
			t.Errorf("%s: a field is left to its zero value", name)
		}
	}
}

// TestTimeoutsTheBreakerCanSee: a sub-budget (or an adaptive ceiling) at or
// past the calls' end, deadline − reserve, would cut a hang as the page's
// DEADLINE, which no breaker counts; a reserve not longer than the cache's
// read bound would cut the last-good read the same way. Each is refused,
// naming the key and the bound.
func TestTimeoutsTheBreakerCanSee(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(*config.Dependencies)
		bounds config.Bounds
		want   string // "" = valid
	}{
		{"timeout just inside", func(d *config.Dependencies) {
			set(d, "coupon", func(x *config.Dependency) { x.Timeout = 1399 * time.Millisecond })
		}, bounds, ""},
		{"timeout at the calls' end", func(d *config.Dependencies) {
			set(d, "coupon", func(x *config.Dependency) { x.Timeout = 1400 * time.Millisecond })
		}, bounds,
			"dependencies.coupon.timeout: 1.4s must be shorter than --deadline 1.5s minus --reserve 100ms = 1.4s"},
		{"timeout past it, under the deadline", func(d *config.Dependencies) {
			set(d, "logistics", func(x *config.Dependency) { x.Timeout = 1450 * time.Millisecond })
		}, bounds,
			"dependencies.logistics.timeout: 1.45s must be shorter than"},
		{"adaptive ceiling at the calls' end", func(d *config.Dependencies) {
			set(d, "inventory", func(x *config.Dependency) { x.AutoTimeout, x.TimeoutMax = true, 1400*time.Millisecond })
		}, bounds, "dependencies.inventory.timeout_max: 1.4s must be shorter than --deadline 1.5s minus --reserve 100ms = 1.4s"},
		{"a larger reserve moves the bound", nil, config.Bounds{Deadline: 1500 * time.Millisecond, Reserve: 600 * time.Millisecond},
			"dependencies.order.timeout: 1s must be shorter than --deadline 1.5s minus --reserve 600ms = 900ms"},
		{"reserve at the cache read's bound", nil, config.Bounds{Deadline: 1500 * time.Millisecond, Reserve: 50 * time.Millisecond},
			"--reserve (ORDERAGG_RESERVE): 50ms must be longer than dependencies.cache.timeout 50ms"},
		{"cache read grown past the reserve", func(d *config.Dependencies) {
			set(d, config.NameCache, func(x *config.Dependency) { x.Timeout = 100 * time.Millisecond })
			for _, name := range d.Names()[:len(d.Names())-1] {
				set(d, name, func(x *config.Dependency) { x.FallbackTimeout = 150 * time.Millisecond })
			}
		}, bounds, "--reserve (ORDERAGG_RESERVE): 100ms must be longer than dependencies.cache.timeout 100ms"},
		{"fallback not longer than the cache read", func(d *config.Dependencies) {
			set(d, "coupon", func(x *config.Dependency) { x.FallbackTimeout = 50 * time.Millisecond })
		}, bounds,
			"dependencies.coupon.fallback_timeout: 50ms must be longer than dependencies.cache.timeout 50ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := config.DefaultDependencies()
			if tc.edit != nil {
				tc.edit(&d)
			}
			err := d.Validate(tc.bounds)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v\nwant %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("not one line: %q", err)
			}
		})
	}
}

func set(d *config.Dependencies, name string, f func(*config.Dependency)) {
	if !d.Update(name, f) {
		panic("no dependency " + name)
	}
}

// TestPatchRefusesBlindTimeouts: the admin PATCH goes through the same
// validation and changes nothing when it fails.
func TestPatchRefusesBlindTimeouts(t *testing.T) {
	d := config.DefaultDependencies()
	before := must(d, "coupon")
	for body, want := range map[string]string{
		`{"timeout":"1450ms"}`:                      "dependencies.coupon.timeout (line 1): 1.45s must be shorter than --deadline 1.5s minus --reserve 100ms = 1.4s",
		`{"timeout":"auto","timeout_max":"1400ms"}`: "dependencies.coupon.timeout_max (line 1): 1.4s must be shorter",
		`{"nope":1}`:                           `dependencies.coupon: line 1: unknown key "nope"`,
		`{"breaker":{"windw":"1s"}}`:           `dependencies.coupon: line 1: unknown key "windw"`,
		`{"bulkhead":{"max_concurrent":-1}}`:   "dependencies.coupon.bulkhead.max_concurrent (line 1): must be at least 1",
		`{"timeout":"abc"}`:                    "cannot unmarshal !!str `abc` into time.Duration",
		`not json`:                             "cannot unmarshal",
		``:                                     "empty body",
		"{\"retry\":\t{\"max_attempts\": 11}}": "dependencies.coupon.retry.max_attempts (line 1): must be 1..10",
		`{"cache_max_age":"0s","timeout":"200ms"}`:      "dependencies.coupon.cache_max_age (line 1): must be positive",
		`{"fallback_timeout":"40ms","timeout":"200ms"}`: "dependencies.coupon.fallback_timeout (line 1): 40ms must be longer than dependencies.cache.timeout 50ms",
	} {
		_, err := d.Patch("coupon", []byte(body), bounds)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v\nwant %q", body, err, want)
		}
	}
	if _, err := d.Patch("payments", []byte(`{"timeout":"1s"}`), bounds); !errors.Is(err, config.ErrUnknownDependency) {
		t.Errorf("unknown dependency: %v", err)
	}
	if must(d, "coupon") != before {
		t.Fatal("a refused PATCH changed the settings")
	}
	next, err := d.Patch("coupon", []byte(`{"timeout":"250ms","breaker":{"sleep_window":"7s"}}`), bounds)
	if err != nil {
		t.Fatal(err)
	}
	if c := must(next, "coupon"); c.Timeout != 250*time.Millisecond || c.Breaker.SleepWindow != 7*time.Second || c.Retry != before.Retry {
		t.Errorf("patched %+v", c)
	}
	if must(d, "coupon") != before {
		t.Error("Patch changed its receiver")
	}
}

// TestConfigFileErrorsNameKeyAndLine: what yaml.v3's strict decoding and the
// validation refuse names the key and its line.
func TestConfigFileErrorsNameKeyAndLine(t *testing.T) {
	for file, want := range map[string]string{
		"dependencies:\n  coupon:\n    breaker:\n      windw: 1s\n":        `line 4: unknown key "windw"`,
		"dependencies:\n  payments:\n    timeout: 1s\n":                    `line 2: unknown key "payments"`,
		"dependencys:\n  coupon: {}\n":                                     `line 1: unknown key "dependencys"`,
		"dependencies:\n  coupon:\n    retry:\n      max_attempts: many\n": "line 4: cannot unmarshal !!str `many` into int",
		"dependencies:\n  coupon:\n\n    timeout: 1450ms\n":                "dependencies.coupon.timeout (line 4): 1.45s must be shorter than",
		"dependencies:\n  coupon:\n    timeout: 1s\n  coupon:\n    x: 1\n": "line 4",
		"dependencies: [\n": "yaml: line 1:",
		"dependencies:\n  coupon:\n    timeout: auto\n    timeout_max: 2s\n": "dependencies.coupon.timeout_max (line 4)",
	} {
		_, err := loadFile(writeTemp(t, file))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v\nwant one line containing %q", file, err, want)
		}
	}
	if _, err := loadFile(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("a missing file loaded")
	}
}

// TestReloadStartsFromTheDefaults: a key removed from the file returns to
// its default, the file's other keys apply, and an empty file is the
// defaults.
func TestReloadStartsFromTheDefaults(t *testing.T) {
	s := config.DefaultServe()
	s.ConfigFile = writeTemp(t, "dependencies:\n  coupon:\n    timeout: 200ms\n    retry:\n      max_attempts: 3\n")
	first, err := s.LoadDependencies()
	if err != nil {
		t.Fatal(err)
	}
	if c := must(first, "coupon"); c.Timeout != 200*time.Millisecond || c.Retry.MaxAttempts != 3 {
		t.Fatalf("coupon %+v", c)
	}
	if err := os.WriteFile(s.ConfigFile, []byte("dependencies:\n  coupon:\n    timeout: 250ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	second, err := s.LoadDependencies()
	if err != nil {
		t.Fatal(err)
	}
	if c := must(second, "coupon"); c.Timeout != 250*time.Millisecond || c.Retry.MaxAttempts != 2 {
		t.Errorf("after reload: %+v, want retry.max_attempts back at its default", c)
	}
	if err := os.WriteFile(s.ConfigFile, []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if empty, err := s.LoadDependencies(); err != nil || !reflect.DeepEqual(empty, config.DefaultDependencies()) {
		t.Errorf("an empty file: %v", err)
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "deps.yaml")
	writeFile(t, path, content)
	return path
}

// FuzzPatch: a PATCH body is refused, leaving the settings untouched, or
// yields settings that validate; never a panic.
func FuzzPatch(f *testing.F) {
	for _, s := range []string{`{"timeout":"300ms"}`, `{"breaker":{"sleep_window":"10s"}}`, `{"nope":1}`, `[]`, ``,
		`{"bulkhead":{"max_concurrent":-1}}`, `{"retry":{"max_attempts":3,"backoff":"5ms"}}`, `timeout: 1s`, `{"timeout":null}`, `{"timeout":"auto"}`} {
		f.Add(s)
	}
	base := config.DefaultDependencies()
	f.Fuzz(func(t *testing.T, body string) {
		d := base
		got, err := d.Patch("coupon", []byte(body), bounds)
		if !reflect.DeepEqual(d, base) {
			t.Fatal("Patch changed its receiver")
		}
		if err == nil {
			if verr := got.Validate(bounds); verr != nil {
				t.Fatalf("accepted %q giving invalid settings: %v", body, verr)
			}
		}
	})
}

// loadFile loads the --config file at path with the default flags.
func loadFile(path string) (config.Dependencies, error) {
	s := config.DefaultServe()
	s.ConfigFile = path
	return s.LoadDependencies()
}
