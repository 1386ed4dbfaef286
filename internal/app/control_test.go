package app

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// newControl is a control over fresh guards with the default settings,
// logging JSON lines into the returned buffer.
func newControl(t *testing.T) (*control, *bytes.Buffer) {
	t.Helper()
	deps := config.DefaultDependencies()
	guards := map[string]*resilience.Guard{}
	for _, name := range deps.Names() {
		d, _ := deps.Get(name)
		g, err := resilience.New(name, d.Config)
		if err != nil {
			t.Fatal(err)
		}
		guards[name] = g
	}
	var logs bytes.Buffer
	return &control{deps: deps, bounds: config.DefaultServe().Bounds(), guards: guards,
		downstreams: map[string]*orderdetail.Downstream{}, logger: slog.New(slog.NewJSONHandler(&logs, nil))}, &logs
}

// logsWithMsg returns the log lines with message msg, decoded.
func logsWithMsg(t *testing.T, logs *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	records, plain := logLines(t, logs.String())
	if len(plain) > 0 {
		t.Fatalf("log lines that are not JSON: %q", plain)
	}
	var out []map[string]any
	for _, m := range records {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestReloadLogsOnlyChanges: a reload logs each dependency whose settings
// it changes, with their before and after, and nothing else.
func TestReloadLogsOnlyChanges(t *testing.T) {
	c, logs := newControl(t)
	if _, err := c.Patch("coupon", []byte(`{"timeout":"250ms"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Patch("inventory", []byte(`{"timeout":"400ms"}`)); err != nil {
		t.Fatal(err)
	}
	// The file: coupon back to its default timeout with a longer sleep
	// window; inventory at the admin's value.
	next := config.DefaultDependencies()
	next.Update("coupon", func(d *config.Dependency) { d.Breaker.SleepWindow = 7 * time.Second })
	next.Update("inventory", func(d *config.Dependency) { d.Timeout = 400 * time.Millisecond })
	logs.Reset()
	n, err := c.Reload(next)
	if err != nil || n != 1 {
		t.Fatalf("Reload = %d, %v; want 1 dependency changed", n, err)
	}
	reloaded := logsWithMsg(t, logs, "settings reloaded")
	if len(reloaded) != 1 || reloaded[0]["dependency"] != "coupon" {
		t.Fatalf("want one line, for coupon: %s", logs)
	}
	before, _ := reloaded[0]["before"].(map[string]any)
	after, _ := reloaded[0]["after"].(map[string]any)
	if before["timeout"] != "250ms" || after["timeout"] != "300ms" || after["breaker"].(map[string]any)["sleep_window"] != "7s" {
		t.Errorf("before %v\nafter %v", before, after)
	}
	if d := c.deps["coupon"]; d.Breaker.SleepWindow != 7*time.Second || d.Timeout != 300*time.Millisecond {
		t.Errorf("coupon in force: %+v", d)
	}
	// The same file again: nothing changes, nothing is logged.
	logs.Reset()
	if n, err := c.Reload(next); err != nil || n != 0 || logs.Len() != 0 {
		t.Errorf("second reload: %d, %v, logs %s", n, err, logs)
	}
}

func TestReloadRefusesInvalidSettings(t *testing.T) {
	c, logs := newControl(t)
	next := config.DefaultDependencies()
	next.Update("order", func(d *config.Dependency) { d.Timeout = 2 * time.Second })
	if _, err := c.Reload(next); err == nil || !strings.Contains(err.Error(), "dependencies.order.timeout") {
		t.Fatalf("Reload = %v", err)
	}
	if d, _ := c.deps.Get("order"); d.Timeout != time.Second || logs.Len() != 0 {
		t.Errorf("a refused reload changed or logged something: %v, %s", d.Timeout, logs)
	}
}
