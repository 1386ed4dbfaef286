package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orderagg/orderagg/internal/downstream"
)

// exampleHeader opens config.example.yaml: how the file is read and how the
// bulkheads are sized. Each line becomes a comment.
var exampleHeader = []string{
	"orderagg per-dependency settings: the file given to `orderagg serve --config`.",
	"",
	"Every key is shown with its built-in default and why it is that. The file is",
	"generated from the code (go test ./internal/config -update), so it cannot",
	"drift: copy it rather than edit it, and keep only the keys you change (an",
	"omitted key keeps its default).",
	"",
	"- Durations are strings with a unit: \"300ms\", \"10s\", \"24h\".",
	"- Unknown keys and invalid values are errors that name the key; at start-up",
	"  they stop the process (exit status 2), on a SIGHUP reload they keep the",
	"  settings in force. A reload starts again from the defaults, so removing a",
	"  key returns it to its default (and undoes admin API changes to it).",
	"- A zero where zero would only mean \"generic default\" (for example",
	"  bulkhead.max_concurrent: 0) is refused: leave the key out instead.",
	"- Every timeout must be shorter than --deadline (1500ms). A sub-budget is",
	"  also cut at run time to the time left minus --reserve (100ms).",
	"- timeout: auto (opt-in, per dependency) makes the sub-budget follow",
	"  max(3\u00d7P99, 2\u00d7P99.9) + timeout_margin over successful calls, starting",
	"  from the timeout in force, moving at most 25 % a second and only past a",
	"  10 % dead band, between timeout_min and timeout_max (and never above",
	"  --deadline minus --reserve). Timeouts never raise it; it does not shrink",
	"  while over 0.1 % of calls time out. /v1/resilience shows timeout_mode",
	"  and the value in force; each change is logged and counted.",
	"- The same keys form the body of PATCH /admin/dependencies/{dep}.",
	"",
	"Sizing: --max-inflight (default 1024) is the one limit that sheds orderagg's",
	"own overload, with an immediate 503 OVERLOADED. A page holds one slot of each",
	"downstream's bulkhead while it waits for it (retries run inside that slot; a",
	"hedge takes a second), and up to one cache slot per section for last-good",
	"reads. By Little's law the calls in flight to a dependency are the page rate",
	"times each call's time, and a call never outlasts its page: so a bulkhead of",
	"max-inflight x slots a page never refuses a healthy or slow-but-in-budget",
	"dependency while admission lets a page in. The built-in bulkheads are exactly",
	"that and follow --max-inflight when this file leaves them out; a smaller one",
	"is allowed (to protect a fragile dependency) but logged as a warning at",
	"start-up, on reload and on PATCH, since its section degrades with REJECTED",
	"under load. See docs/design.md, \"Sizing\".",
}

// sharedWhy gives the reasons of the defaults every dependency shares
// (resilience.Config.WithDefaults' and DefaultDependenciesFor's), by key.
// A registry entry's Why, or cacheWhy, overrides one where that dependency
// chose its own. "bulkhead.max_concurrent" is a format: the slots a page holds.
var sharedWhy = map[string]string{
	"bulkhead.max_concurrent":      "--max-inflight x %d slot a page: never refuses a call admission let in (follows --max-inflight when left out)",
	"bulkhead.max_queue":           "a full bulkhead rejects at once: a queue adds latency, not throughput",
	"bulkhead.max_wait":            "0 = the call's whole sub-budget; matters only with a queue",
	"breaker.window":               "holds enough calls to judge at modest traffic, short enough to react within seconds",
	"breaker.buckets":              "1s buckets: old outcomes age out smoothly, not all at once",
	"breaker.min_requests":         "a few failures in a quiet window must not open the breaker",
	"breaker.error_percent":        "half the calls failing means the dependency is sick, not unlucky",
	"breaker.slow_call_duration":   "0 = 80% of the timeout: a call that close to it is slow",
	"breaker.slow_call_percent":    "slowness alone opens it only if every call is slow; timeouts already count as errors",
	"breaker.consecutive_failures": "this many failures/timeouts in a row open it at once (a hang is seen in under a second); 5% stalls string 10 together about once in 1e13",
	"breaker.sleep_window":         "first sleep before a probe: a blip recovers fast; doubles after each failed probe",
	"breaker.max_sleep_window":     "cap of the doubling sleep: a long outage is probed every 5s, not hammered (a 100ms window kept hammering one)",
	"breaker.half_open_probes":     "one trial call decides; more would load a service still recovering",
	"retry.max_attempts":           "one retry within the sub-budget; never three, a third could not fit",
	"retry.backoff":                "retry soon, with full jitter so callers do not retry in step",
	"retry.max_backoff":            "a longer wait would not fit any sub-budget",
	"retry.budget_percent":         "retries and hedges add at most a fifth more load to a struggling dependency",
	"retry.budget_min":             "a quiet dependency may still retry a few times per window",
	"hedge.enabled":                "a hedge doubles a slow call's load: turn on only where the tail dominates and there is headroom",
	"hedge.percentile":             "hedge only calls slower than 95% of their peers",
	"hedge.min_delay":              "never hedge sooner, nor before there is latency history",
	"fallback_timeout":             "bounds the last-good read after a failed call: longer than cache.timeout (so a slow Redis times out where it counts), inside --reserve (100ms)",
	"timeout_margin":               "added to max(3×P99, 2×P99.9) for recommended_timeout_ms; the classic 500ms would not fit a 1500ms page",
	"timeout_min":                  "floor of an adaptive sub-budget (timeout: auto, opt-in): below this a call could not even cross the network; unused with a fixed timeout",
	"timeout_max":                  "0 = timeout; ceiling of an adaptive sub-budget, which must leave the page its reserve",
}

// cacheAbout and cacheWhy say why the cache's defaults (DefaultDependenciesFor)
// are what they are, as a registry entry's About and Why do for a downstream.
// "bulkhead.max_concurrent" is a format: the slots a page holds.
const cacheAbout = "the last-good reads made after a downstream failed; they run inside --reserve (100ms)."

var cacheWhy = map[string]string{
	"timeout":                 "Redis nearby answers in about 1ms; two reads must fit the 100ms reserve",
	"bulkhead.max_concurrent": "--max-inflight x %d: every section of a page may read its last good answer at once (follows --max-inflight when left out)",
	"breaker.min_requests":    "judge Redis on 20 calls, like the downstreams",
	"retry.max_attempts":      "no retry: it would eat the reserve, and the semantic default is next anyway",
	"fallback_timeout":        "the cache's own fallback is the semantic default, which needs no time",
}

// ExampleFile returns config.example.yaml: every dependency's every key with
// its built-in default (DefaultDependencies) and the reason for it, from the
// registry entry's About and Why, cacheWhy, or sharedWhy. It fails when a
// key has no reason, when an entry sets a default without saying why (a
// shared reason would not be its reason), or when a reason names no key.
func ExampleFile() (string, error) {
	var b strings.Builder
	for _, l := range exampleHeader {
		b.WriteString(strings.TrimRight("# "+l, " ") + "\n")
	}
	b.WriteString("\ndependencies:\n")
	def := DefaultDependencies()
	for _, name := range def.Names() {
		about, why := cacheAbout, cacheWhy
		var own map[string]bool // the keys the entry sets itself; none for the cache
		for _, e := range downstream.Registered() {
			if e.Name == name {
				about, why = e.About, e.Why
				own = setKeys(Dependency{Config: e.Defaults, CacheMaxAge: e.CacheMaxAge})
			}
		}
		d, _ := def.Get(name)
		var n yaml.Node
		if err := n.Encode(d); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\n  # %s: %s\n  %s:\n", name, about, name)
		used := map[string]bool{}
		err := writeKeys(&b, &n, "", "    ", func(key string) (string, error) {
			if name == NameCache && key == "cache_max_age" {
				return "", errSkip // the store has no last-good copy of itself
			}
			r, ok := why[key]
			used[key] = ok
			if !ok {
				if own[key] {
					return "", fmt.Errorf("%s: %s is set in the registry without a reason (Why)", name, key)
				}
				r, ok = sharedWhy[key]
			}
			if !ok {
				return "", fmt.Errorf("%s: no reason for %s", name, key)
			}
			if strings.Contains(r, "%d") {
				r = fmt.Sprintf(r, def.SlotsPerPage(name))
				if def.SlotsPerPage(name) != 1 {
					r = strings.Replace(r, " slot a page", " slots a page", 1)
				}
			}
			return r, nil
		})
		if err != nil {
			return "", err
		}
		for key := range why {
			if !used[key] {
				return "", fmt.Errorf("%s: the reason for %s names no setting", name, key)
			}
		}
	}
	return b.String(), nil
}

// errSkip leaves a key out of the file.
var errSkip = errors.New("skip")

// writeKeys writes mapping n's keys, in the struct's order, one a line with
// the value as the file writes it and its reason as a comment.
func writeKeys(b *strings.Builder, n *yaml.Node, prefix, indent string, why func(key string) (string, error)) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		if v.Kind == yaml.MappingNode {
			fmt.Fprintf(b, "%s%s:\n", indent, k)
			if err := writeKeys(b, v, prefix+k+".", indent+"  ", why); err != nil {
				return err
			}
			continue
		}
		r, err := why(prefix + k)
		if err == errSkip {
			continue
		}
		if err != nil {
			return err
		}
		val := v.Value
		if d, err := time.ParseDuration(v.Value); err == nil && v.ShortTag() == "!!str" {
			val = exampleDuration(d)
		}
		fmt.Fprintf(b, "%s%s: %s  # %s\n", indent, k, val, r)
	}
	return nil
}

// setKeys lists the leaf keys whose value in d is not zero.
func setKeys(d Dependency) map[string]bool {
	out := map[string]bool{}
	var walk func(prefix string, s, zero map[string]any)
	walk = func(prefix string, s, zero map[string]any) {
		for k, v := range s {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub, zero[k].(map[string]any))
			} else if fmt.Sprint(v) != fmt.Sprint(zero[k]) {
				out[prefix+k] = true
			}
		}
	}
	walk("", d.Settings(), Dependency{}.Settings())
	return out
}

// exampleDuration writes d in the largest unit that gives at least two of
// it, as people write budgets: "1000ms" beside "600ms", "60s", "24h".
func exampleDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		unit string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d%u.d == 0 && d >= 2*u.d {
			return fmt.Sprintf("%d%s", d/u.d, u.unit)
		}
	}
	return formatDuration(d)
}
