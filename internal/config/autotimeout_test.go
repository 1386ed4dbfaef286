package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/config"
)

// TestTimeoutAuto: "timeout: auto" in a file and in a PATCH body turns the
// adaptive sub-budget on, a duration turns it off, and the settings shown
// say which.
func TestTimeoutAuto(t *testing.T) {
	deadline := config.DefaultServe().Bounds()
	dir := t.TempDir()
	path := filepath.Join(dir, "deps.yaml")
	file := "dependencies:\n  logistics:\n    timeout: auto\n    timeout_min: 100ms\n    timeout_max: 900ms\n  coupon:\n    timeout: 250ms\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	deps, err := loadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lg, _ := deps.Get("logistics")
	def, _ := config.DefaultDependencies().Get("logistics")
	if !lg.AutoTimeout || lg.Timeout != def.Timeout || lg.TimeoutMin != 100*time.Millisecond || lg.TimeoutMax != 900*time.Millisecond {
		t.Fatalf("logistics: auto=%v timeout=%v [%v, %v]; want auto starting from the default %v", lg.AutoTimeout, lg.Timeout, lg.TimeoutMin, lg.TimeoutMax, def.Timeout)
	}
	if cp, _ := deps.Get("coupon"); cp.AutoTimeout || cp.Timeout != 250*time.Millisecond {
		t.Fatalf("coupon: auto=%v timeout=%v", cp.AutoTimeout, cp.Timeout)
	}
	if s := lg.Settings(); s["timeout"] != "auto" || s["timeout_max"] != "900ms" {
		t.Fatalf("settings shown: timeout %v, timeout_max %v", s["timeout"], s["timeout_max"])
	}

	// The admin API: to a duration and back, any case, JSON or YAML.
	fixed, err := deps.Patch("logistics", []byte(`{"timeout":"400ms"}`), deadline)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := fixed.Get("logistics")
	if f.AutoTimeout || f.Timeout != 400*time.Millisecond {
		t.Fatalf("after PATCH 400ms: auto=%v timeout=%v", f.AutoTimeout, f.Timeout)
	}
	if s := f.Settings(); s["timeout"] != "400ms" {
		t.Fatalf("settings shown after PATCH 400ms: timeout %v", s["timeout"])
	}
	for _, body := range []string{`{"timeout":"AUTO"}`, "timeout: auto", `{"timeout": "auto", "timeout_max": "1s"}`} {
		back, err := fixed.Patch("logistics", []byte(body), deadline)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		b, _ := back.Get("logistics")
		if !b.AutoTimeout || b.Timeout != 400*time.Millisecond {
			t.Fatalf("%s: auto=%v timeout=%v, want auto from 400ms", body, b.AutoTimeout, b.Timeout)
		}
	}
	// A key other than timeout is still a duration only, even in the same body.
	for body, want := range map[string]string{
		`{"timeout":"auto","fallback_timeout":"auto"}`: "dependencies.logistics: line 1: cannot unmarshal !!str `auto` into time.Duration",
		`{"fallback_timeout":"auto","timeout":"auto"}`: "dependencies.logistics: line 1: cannot unmarshal !!str `auto` into time.Duration",
		`{"timeout":"auto","timeout_min":"2s"}`:        "dependencies.logistics.timeout_min (line 1): must not exceed timeout_max (900ms), got 2s",
		`{"timeout":"auto","timeout_max":"1400ms"}`:    "dependencies.logistics.timeout_max (line 1): 1.4s must be shorter than --deadline 1.5s minus --reserve 100ms = 1.4s",
		`{"timeout":"sometimes"}`:                      "dependencies.logistics: line 1: cannot unmarshal !!str `sometimes` into time.Duration",
		`{"timeout":true}`:                             "dependencies.logistics: line 1: cannot unmarshal !!bool `true` into time.Duration",
	} {
		_, err := deps.Patch("logistics", []byte(body), deadline)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v\nwant it to contain %q", body, err, want)
		}
	}

	// What the admin API shows is a body that gives the same settings back.
	shown, err := json.Marshal(lg.Settings())
	if err != nil {
		t.Fatal(err)
	}
	again, err := deps.Patch("logistics", shown, deadline)
	if again, _ := again.Get("logistics"); err != nil || again != lg {
		t.Fatalf("round trip of %s: %+v, %v", shown, again, err)
	}
	// A file line names the line of a bad mode.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("dependencies:\n  logistics:\n\n    timeout: automatic\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadFile(bad); err == nil ||
		!strings.Contains(err.Error(), "line 4: cannot unmarshal !!str `automatic` into time.Duration") {
		t.Fatalf("bad mode in a file: %v", err)
	}
}
