package telemetry

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

// runbookPath is the operator's guide whose metric names must match /metrics.
const runbookPath = "../../docs/runbook.md"

// metricToken matches metric names in the runbook; a trailing "*" (as in
// go_memstats_*) stands for any family with that prefix.
var metricToken = regexp.MustCompile(`\b(?:orderagg|go|process|db_client|target)_[a-z0-9_]*\*?`)

// TestRunbookNamesExist records one event of every kind, scrapes /metrics,
// and checks that every metric the runbook names is there, and that every
// orderagg_ metric and event there is in the runbook: the guide an operator
// reads during an incident must not send them after a name that does not
// exist, nor leave one out.
func TestRunbookNamesExist(t *testing.T) {
	doc, err := os.ReadFile(runbookPath)
	if err != nil {
		t.Fatal(err)
	}
	runbook := string(doc)

	h := newHarness(t)
	exerciseEverything(t, h)
	fams := scrape(t, h.tel)

	hasFamily := func(name string) bool {
		if prefix, ok := strings.CutSuffix(name, "*"); ok {
			for f := range fams {
				if strings.HasPrefix(f, prefix) {
					return true
				}
			}
			return false
		}
		if _, ok := fams[name]; ok {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				if f, ok := fams[base]; ok && f.GetType().String() == "HISTOGRAM" {
					return true
				}
			}
		}
		return false
	}
	tokens := metricToken.FindAllString(runbook, -1)
	slices.Sort(tokens)
	tokens = slices.Compact(tokens)
	var checked int
	for _, name := range tokens {
		if strings.HasSuffix(name, "_") {
			continue // a prose fragment such as "orderagg_" on its own
		}
		checked++
		if !hasFamily(name) {
			t.Errorf("the runbook names %s, which /metrics does not have", name)
		}
	}
	if checked < 20 {
		t.Errorf("found only %d metric names in the runbook; is the pattern wrong?", checked)
	}

	for name := range fams {
		if strings.HasPrefix(name, "orderagg_") && !strings.Contains(runbook, "`"+name+"`") {
			t.Errorf("/metrics has %s, which the runbook's reference does not list", name)
		}
	}
	for _, ev := range eventNames() {
		if !strings.Contains(runbook, "| `"+ev+"` |") {
			t.Errorf("event %q is not in the runbook's event table", ev)
		}
	}
}

// eventNames lists every value of the event attribute.
func eventNames() []string {
	var out []string
	for k := resilience.KindSuccess; k.String() != "unknown"; k++ {
		out = append(out, k.String())
	}
	return append(out, "fallback_success", "fallback_failure", EventCacheHit, EventCacheMiss)
}

// exerciseEverything makes every instrument report at least once.
func exerciseEverything(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	l := h.tel.Listener(h.log)
	for k := resilience.KindSuccess; k.String() != "unknown"; k++ {
		l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: k, Attempt: 1, Start: time.Now(), Duration: time.Millisecond})
	}
	l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: resilience.KindFailure, Attempt: 2, Err: errors.New("500")})
	l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: resilience.KindSuccess, Attempt: 3, Hedge: true})
	l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: resilience.KindSuccess, Fallback: true})
	l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: resilience.KindFailure, Fallback: true})
	l.OnStateChange(resilience.StateChange{Dependency: "inventory", From: resilience.StateClosed, To: resilience.StateOpen})
	h.tel.Observer().CacheLookup(ctx, "inventory", "hit")
	h.tel.Observer().CacheLookup(ctx, "inventory", "absent")
	h.tel.RecordRequest(ctx, 200, false, time.Millisecond)

	g, err := resilience.New("inventory", resilience.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.tel.ObserveGuards([]*resilience.Guard{g}); err != nil {
		t.Fatal(err)
	}
	if err := h.tel.ObserveAdmission(func() int { return 1024 }, func() int { return 0 }); err != nil {
		t.Fatal(err)
	}
	h.tel.RecordRejected(context.Background())
	if err := h.tel.ObserveConnections("api", func() int64 { return 0 }); err != nil {
		t.Fatal(err)
	}
	if err := h.tel.ObserveCache(func() CacheStats { return CacheStats{} }); err != nil {
		t.Fatal(err)
	}
	c := newRedis(t)
	if err := h.tel.InstrumentRedis(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}
