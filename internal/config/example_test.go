package config_test

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orderagg/orderagg/build/testenv"
	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/resilience"
)

var update = flag.Bool("update", false, "rewrite config.example.yaml and the README's flag tables (go generate ./internal/config)")

// TestExampleFile: config.example.yaml is what exampleFile generates from
// the registry and the defaults, and it loads into exactly the defaults.
func TestExampleFile(t *testing.T) {
	const path = "../../config.example.yaml"
	want := exampleFile(t)
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != want {
		t.Fatalf("%s is out of date (%v); run go generate ./internal/config", path, err)
	}
	s := config.DefaultServe()
	s.ConfigFile = path
	deps, err := s.LoadDependencies()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range deps.Names() {
		if got, _ := deps.Get(name); fmt.Sprint(got.Settings()) != fmt.Sprint(must(config.DefaultDependencies(), name).Settings()) {
			t.Errorf("%s: the example loads as %v, not the defaults", name, got.Settings())
		}
	}
}

// TestREADMEConfigTables: the README's flag tables are generated from the
// flag definitions.
func TestREADMEConfigTables(t *testing.T) {
	const path = "../../README.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	serve, sim := config.DefaultServe(), config.DefaultSim()
	for name, fs := range map[string]*flag.FlagSet{"serve": config.ServeFlags(&serve), "sim": config.SimFlags(&sim)} {
		start, end := "<!-- flags:"+name+" -->\n", "<!-- /flags:"+name+" -->"
		i, j := strings.Index(readme, start), strings.Index(readme, end)
		if i < 0 || j < i {
			t.Fatalf("README lacks the %s table markers", name)
		}
		if table := testenv.FlagTable(fs, config.EnvPrefix); readme[i+len(start):j] != table {
			readme = readme[:i+len(start)] + table + readme[j:]
			if !*update {
				t.Errorf("README's %s table is out of date; run go generate ./internal/config", name)
			}
		}
	}
	if *update {
		if err := os.WriteFile(path, []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const exampleHeader = `# orderagg per-dependency settings: the file given to ` + "`orderagg serve --config`" + `.
# Generated from the registry and the built-in defaults by
# go generate ./internal/config: copy the keys you change; a key left out
# keeps its default.
#
# - Durations are strings with a unit: "300ms", "10s", "24h".
# - An unknown key or an invalid value is an error naming the key and its
#   line: at start-up the process exits with status 2, on SIGHUP the settings
#   in force stay. A reload starts again from the defaults.
# - timeout and timeout_max must be shorter than --deadline minus --reserve
#   (1500ms - 100ms): a call cut there ends as the page's DEADLINE, which no
#   breaker sees. --reserve and each fallback_timeout must be longer than
#   cache.timeout, the bound of a last-good read.
# - timeout: auto makes the sub-budget follow max(3xP99, 2xP99.9) +
#   timeout_margin of successful calls, between timeout_min and timeout_max.
# - The same keys form the body of PATCH /admin/dependencies/{dep}.
`

// sharedWhy gives the reasons of the defaults every dependency shares
// (resilience.Config.WithDefaults'), by key.
var sharedWhy = map[string]string{
	"timeout":                      "a second; every registry entry sets its own",
	"bulkhead.max_concurrent":      "every section's own follows --max-inflight",
	"breaker.window":               "enough calls to judge at modest traffic, short enough to react within seconds",
	"breaker.buckets":              "1s buckets: old outcomes age out smoothly",
	"breaker.min_requests":         "a few failures in a quiet window must not open the breaker",
	"breaker.error_percent":        "half the calls failing means the dependency is sick, not unlucky",
	"breaker.consecutive_failures": "this many failures in a row open it at once: a hang is seen in under a second",
	"breaker.sleep_window":         "how long an open breaker waits before its one probe",
	"retry.max_attempts":           "one retry within the sub-budget; a third could not fit",
	"retry.backoff":                "retry soon, with full jitter so callers do not retry in step",
	"retry.max_backoff":            "a longer wait would not fit any sub-budget",
	"fallback_timeout":             "bounds the last-good read after a failed call: longer than cache.timeout, inside --reserve",
	"timeout_margin":               "added to max(3xP99, 2xP99.9) for recommended_timeout_ms",
	"timeout_min":                  "floor of an adaptive sub-budget",
	"timeout_max":                  "0 = timeout; ceiling of an adaptive sub-budget",
}

// cacheAbout and cacheWhy say why config.CacheDefaults are what they are,
// as a registry entry's About and Why do for a downstream.
const cacheAbout = "the last-good reads made after a downstream failed; they run inside --reserve."

var cacheWhy = map[string]string{
	"timeout":                 "Redis nearby answers in about 1ms; two reads fit the 100ms reserve",
	"bulkhead.max_concurrent": "--max-inflight x one slot per section: every section may read its last good answer at once (follows --max-inflight when left out)",
	"retry.max_attempts":      "no retry: it would eat the reserve, and the semantic default is next anyway",
}

// exampleFile writes config.example.yaml: for each dependency the keys whose
// default is its own, with the reason for each, then once the keys every
// section shares, with their defaults and reasons.
func exampleFile(t *testing.T) string {
	var b strings.Builder
	b.WriteString(exampleHeader + "\ndependencies:\n")
	generic := leaves(t, config.Dependency{Config: resilience.Config{}.WithDefaults()})
	defaults := config.DefaultDependencies()
	for _, name := range defaults.Names() {
		about, why := cacheAbout, cacheWhy
		for _, e := range downstream.Registered() {
			if e.Name == name {
				about, why = e.About, maps.Clone(e.Why)
				why["bulkhead.max_concurrent"] = "--max-inflight x the slots a page holds: never refuses a call admission let in (follows --max-inflight when left out)"
			}
		}
		var own []leaf
		for i, l := range leaves(t, must(defaults, name)) {
			if l.value != generic[i].value || why[l.key] != "" {
				if l.why = why[l.key]; l.why == "" {
					t.Errorf("%s: %s = %s is set without a reason (the registry entry's Why)", name, l.key, l.value)
				}
				own = append(own, l)
			}
		}
		fmt.Fprintf(&b, "\n  # %s: %s\n  %s:\n", name, about, name)
		writeLeaves(&b, own, "    ", "")
	}
	b.WriteString("\n# Every section also takes these keys; the values are the defaults:\n#\n")
	for i := range generic {
		generic[i].why = sharedWhy[generic[i].key]
		if generic[i].why == "" && generic[i].key != "cache_max_age" {
			t.Errorf("no reason for the shared default %s", generic[i].key)
		}
	}
	writeLeaves(&b, generic[:len(generic)-1], "  ", "# ") // cache_max_age has no shared default
	return b.String()
}

type leaf struct{ key, value, why string }

// leaves lists d's settings as the file writes them, in the struct's order.
func leaves(t *testing.T, d config.Dependency) []leaf {
	var n yaml.Node
	if err := n.Encode(d); err != nil {
		t.Fatal(err)
	}
	var out []leaf
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := prefix+n.Content[i].Value, n.Content[i+1]
			if v.Kind == yaml.MappingNode {
				walk(k+".", v)
			} else if d, err := time.ParseDuration(v.Value); err == nil && v.Tag == "!!str" {
				out = append(out, leaf{key: k, value: shortDuration(d)})
			} else {
				out = append(out, leaf{key: k, value: v.Value})
			}
		}
	}
	walk("", &n)
	return out
}

// writeLeaves writes nested keys, each with its reason as a comment, every
// line starting with prefix.
func writeLeaves(b *strings.Builder, leaves []leaf, indent, prefix string) {
	var open []string
	for _, l := range leaves {
		parts := strings.Split(l.key, ".")
		parents := parts[:len(parts)-1]
		same := 0
		for same < len(open) && same < len(parents) && open[same] == parents[same] {
			same++
		}
		for i := same; i < len(parents); i++ {
			fmt.Fprintf(b, "%s%s%s:\n", prefix, indent+strings.Repeat("  ", i), parents[i])
		}
		open = parents
		fmt.Fprintf(b, "%s%s%s: %s  # %s\n", prefix, indent+strings.Repeat("  ", len(parents)), parts[len(parts)-1], l.value, l.why)
	}
}

// shortDuration writes d as people write budgets: "1000ms", "60s", "24h".
func shortDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d%u.d == 0 && d >= 2*u.d {
			return fmt.Sprintf("%d%s", d/u.d, u.unit)
		}
	}
	return d.String()
}

// must returns the named dependency's settings, which must be there.
func must(d config.Dependencies, name string) config.Dependency {
	dep, ok := d.Get(name)
	if !ok {
		panic("no dependency " + name)
	}
	return dep
}
