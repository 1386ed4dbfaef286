package app

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
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

// reloadWith writes body as the --config file and reloads it.
func reloadWith(t *testing.T, c *control, body string) {
	t.Helper()
	cfg := config.DefaultServe()
	cfg.ConfigFile = filepath.Join(t.TempDir(), "orderagg.yaml")
	if err := os.WriteFile(cfg.ConfigFile, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c.reloadFile(cfg)
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
	const file = "dependencies:\n  coupon:\n    breaker:\n      sleep_window: 7s\n  inventory:\n    timeout: 400ms\n"
	logs.Reset()
	reloadWith(t, c, file)
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
	if done := logsWithMsg(t, logs, "config reloaded"); len(done) != 1 || done[0]["dependencies_changed"] != 1.0 {
		t.Errorf("config reloaded lines: %v", done)
	}
	// The same file again: nothing changes, no dependency is logged.
	logs.Reset()
	reloadWith(t, c, file)
	if n := len(logsWithMsg(t, logs, "settings reloaded")); n != 0 {
		t.Errorf("second reload logged %d changes: %s", n, logs)
	}
}

func TestReloadRefusesInvalidSettings(t *testing.T) {
	c, logs := newControl(t)
	reloadWith(t, c, "dependencies:\n  order:\n    timeout: 2s\n")
	if failed := logsWithMsg(t, logs, "config reload failed; keeping the settings in force"); len(failed) != 1 ||
		!strings.Contains(failed[0]["err"].(string), "dependencies.order.timeout") {
		t.Fatalf("want the failure logged, naming the key: %s", logs)
	}
	if d, _ := c.deps.Get("order"); d.Timeout != time.Second || len(logsWithMsg(t, logs, "settings reloaded")) != 0 {
		t.Errorf("a refused reload changed something: %v, %s", d.Timeout, logs)
	}
}

// Settings are validated as the guard will take them: a zero retry.backoff
// is its 10ms default, past this max_backoff, so the PATCH is an error that
// names the key, and changes nothing.
func TestPatchRefusedByTheGuardChangesNothing(t *testing.T) {
	c, _ := newControl(t)
	before := c.deps["coupon"]
	_, err := c.Patch("coupon", []byte(`{"retry":{"backoff":"0s","max_backoff":"5ms"}}`))
	if err == nil || !strings.Contains(err.Error(), "dependencies.coupon.retry.max_backoff") {
		t.Fatalf("want an error naming dependencies.coupon.retry.max_backoff, got %v", err)
	}
	if c.deps["coupon"] != before {
		t.Errorf("settings changed: %+v", c.deps["coupon"].Retry)
	}
}
