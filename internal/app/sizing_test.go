package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orderagg/orderagg/internal/config"
)

const undersizedMsg = "bulkhead smaller than the pages admitted: healthy calls will be REJECTED under load"

// A PATCH that shrinks a bulkhead below what --max-inflight admits is
// applied, and warned about with the key and the minimum; a reload warns
// about every such bulkhead; the defaults warn about none.
func TestUndersizedBulkheadsAreWarnedAbout(t *testing.T) {
	c, logs := newControl(t)
	c.maxInflight = config.DefaultMaxInflight
	c.warnUndersized("")
	if got := logsWithMsg(t, logs, undersizedMsg); len(got) != 0 {
		t.Fatalf("defaults warned: %v", got)
	}
	if _, err := c.Patch("logistics", []byte(`{"bulkhead":{"max_concurrent":50}}`)); err != nil {
		t.Fatal(err)
	}
	got := logsWithMsg(t, logs, undersizedMsg)
	if len(got) != 1 || got[0]["key"] != "dependencies.logistics.bulkhead.max_concurrent" ||
		got[0]["max_concurrent"] != 50.0 || got[0]["need"] != 1024.0 || got[0]["level"] != "WARN" {
		t.Fatalf("after the PATCH: %v", got)
	}
	if in, _ := c.deps.Get("logistics"); in.Bulkhead.MaxConcurrent != 50 {
		t.Errorf("the PATCH was not applied: %d", in.Bulkhead.MaxConcurrent)
	}
	// A PATCH of another dependency does not repeat it.
	if _, err := c.Patch("coupon", []byte(`{"timeout":"250ms"}`)); err != nil {
		t.Fatal(err)
	}
	if n := len(logsWithMsg(t, logs, undersizedMsg)); n != 1 {
		t.Errorf("%d warnings after an unrelated PATCH, want still 1", n)
	}
	next := config.DefaultDependencies()
	next.Update("order", func(d *config.Dependency) { d.Bulkhead.MaxConcurrent = 100 })
	next.Update("cache", func(d *config.Dependency) { d.Bulkhead.MaxConcurrent = 100 })
	if _, err := c.Reload(next); err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for _, m := range logsWithMsg(t, logs, undersizedMsg)[1:] {
		keys = append(keys, m["key"].(string))
	}
	if strings.Join(keys, " ") != "dependencies.order.bulkhead.max_concurrent dependencies.cache.bulkhead.max_concurrent" {
		t.Errorf("reload warned about %v", keys)
	}
}

// At start-up, a --config file written for the old defaults still starts,
// with a warning per bulkhead it pins below --max-inflight.
func TestStartupWarnsAboutUndersizedBulkheads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deps.yaml")
	if err := os.WriteFile(path, []byte("dependencies:\n  inventory:\n    bulkhead:\n      max_concurrent: 50\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _ := startService(t, []string{"--config", path, "--max-inflight", "200"}, nil)
	logs := s.logs.String()
	if strings.Count(logs, undersizedMsg) != 1 || !strings.Contains(logs, `"key":"dependencies.inventory.bulkhead.max_concurrent","max_concurrent":50,"need":200,"max_inflight":200`) {
		t.Errorf("start-up logs:\n%s", grepLines(logs, "bulkhead"))
	}
}
