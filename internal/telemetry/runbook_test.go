package telemetry

import (
	"context"
	"errors"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/orderagg/orderagg/internal/cache"
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
	return append(out, "fallback_success", "fallback_failure", "cache_hit", "cache_miss")
}

// exerciseEverything makes every instrument report at least once.
func exerciseEverything(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	l := h.tel.Listener()
	for k := resilience.KindSuccess; k.String() != "unknown"; k++ {
		l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: k, Attempt: 1, Start: time.Now(), Duration: time.Millisecond})
	}
	l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: resilience.KindFailure, Attempt: 2, Err: errors.New("500")})
	l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: resilience.KindSuccess, Fallback: true})
	l.OnEvent(ctx, resilience.Event{Dependency: "inventory", Kind: resilience.KindFailure, Fallback: true})
	l.OnStateChange(resilience.StateChange{Dependency: "inventory", From: resilience.StateClosed, To: resilience.StateOpen})
	h.tel.Listener().CacheLookup(ctx, "inventory", "hit")
	h.tel.Listener().CacheLookup(ctx, "inventory", "absent")
	h.tel.RecordRequest(ctx, 200, false, time.Millisecond)

	var guards []*resilience.Guard
	for _, name := range []string{"order", "inventory", "coupon", "logistics", "cache"} {
		g, err := resilience.New(name, resilience.Config{})
		if err != nil {
			t.Fatal(err)
		}
		guards = append(guards, g)
	}
	if err := h.tel.Observe(State{
		Guards:    guards,
		Admission: func() (int, int) { return 1024, 0 },
		Cache:     func() cache.Stats { return cache.Stats{QueueCapacity: 1024} },
	}); err != nil {
		t.Fatal(err)
	}
	h.tel.RecordRejected(context.Background())
	c := newRedis(t)
	if err := h.tel.InstrumentRedis(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestRunbookQueriesMatchExposition reads every PromQL query in the
// runbook — the ```promql blocks and the inline code that is a query — and
// checks it against /metrics: each metric it selects exists, each label it
// matches, groups or joins on exists on those metrics, and each label value
// it matches exactly is one the exposition has. A query that names a
// metric, a label or an event that was renamed would otherwise return
// nothing during an incident, which looks just like "no problem".
func TestRunbookQueriesMatchExposition(t *testing.T) {
	doc, err := os.ReadFile(runbookPath)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	exerciseEverything(t, h)
	h.tel.RecordRequest(context.Background(), 503, true, time.Millisecond)
	fams := scrape(t, h.tel)

	queries := runbookQueries(string(doc))
	if len(queries) < 15 {
		t.Fatalf("found only %d queries in the runbook; is the extraction wrong? %q", len(queries), queries)
	}
	t.Logf("%d queries", len(queries))
	for _, q := range queries {
		sels, groupLabels := parseQuery(q)
		if len(sels) == 0 {
			continue // a placeholder such as rate(...{event="x"}[5m])
		}
		var labelSets []map[string]map[string]bool // per selector: label → values
		for _, s := range sels {
			labels, ok := familyLabels(fams, s.metric)
			if !ok {
				t.Errorf("query %q: no metric %s in /metrics", q, s.metric)
				continue
			}
			labelSets = append(labelSets, labels)
			for _, m := range s.matchers {
				values, ok := labels[m.name]
				switch {
				case !ok:
					t.Errorf("query %q: %s has no label %q", q, s.metric, m.name)
				case m.op == "=" && !values[m.value]:
					t.Errorf("query %q: no %s series has %s=%q (have %v)", q, s.metric, m.name, m.value, slices.Sorted(maps.Keys(values)))
				}
			}
		}
		for _, l := range groupLabels {
			found := false
			for _, ls := range labelSets {
				_, ok := ls[l]
				found = found || ok
			}
			if !found && len(labelSets) > 0 {
				t.Errorf("query %q groups or joins on %q, which none of its metrics has", q, l)
			}
		}
	}
}

var (
	promqlBlock = regexp.MustCompile("(?s)```promql\n(.*?)```")
	inlineCode  = regexp.MustCompile("`([^`\n]+)`")
	// a query names a metric and uses PromQL syntax: a call, a matcher, a range
	// or an operator between series
	looksLikeQuery = regexp.MustCompile(`[a-z_]+_[a-z_]+.*[({\[/]|[({\[].*[a-z_]+_[a-z_]+`)
	stringLit      = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	clause         = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	selector       = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?\s*(\(?)`)
	matcherRE      = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)?\s*("(?:[^"\\]|\\.)*")?`)
)

// promqlWords are PromQL's own identifiers: not metric names.
var promqlWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "le": true,
}

// runbookQueries lists the queries in doc: each line of a promql block (a
// line starting with white space continues the one before; # lines are
// comments) and each inline code span that looks like a query.
func runbookQueries(doc string) []string {
	var out []string
	for _, b := range promqlBlock.FindAllStringSubmatch(doc, -1) {
		var cur string
		for line := range strings.Lines(b[1]) {
			line = strings.TrimRight(line, "\n")
			trimmed := strings.TrimSpace(line)
			switch {
			case trimmed == "" || strings.HasPrefix(trimmed, "#"):
				continue
			case line != trimmed && cur != "":
				cur += " " + trimmed
				continue
			}
			if cur != "" {
				out = append(out, cur)
			}
			cur = trimmed
		}
		if cur != "" {
			out = append(out, cur)
		}
	}
	for _, m := range inlineCode.FindAllStringSubmatch(doc, -1) {
		if looksLikeQuery.MatchString(m[1]) && metricToken.MatchString(m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

type matcher struct{ name, op, value string }

type sel struct {
	metric   string
	matchers []matcher
}

// parseQuery finds the selectors of q and the labels of its by, without, on
// and ignoring clauses. It is a scanner, not a PromQL parser, but the
// runbook's queries use only selectors, calls, aggregations with clauses,
// ranges and arithmetic.
func parseQuery(q string) ([]sel, []string) {
	var groups []string
	for _, c := range clause.FindAllStringSubmatch(q, -1) {
		for l := range strings.SplitSeq(c[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				groups = append(groups, l)
			}
		}
	}
	q = clause.ReplaceAllString(q, " ")
	q = regexp.MustCompile(`\[[0-9a-z]+\]`).ReplaceAllString(q, " ") // ranges
	var sels []sel
	// Strings are blanked outside matchers first, so their words are not
	// taken for metrics: matchers are read before that from the original.
	for _, m := range selector.FindAllStringSubmatchIndex(q, -1) {
		name := q[m[2]:m[3]]
		isCall := m[6] >= 0 && m[7] > m[6]
		if isCall || promqlWords[name] || !strings.Contains(name, "_") || inString(q, m[2]) {
			continue
		}
		s := sel{metric: name}
		if m[4] >= 0 {
			body := strings.Trim(q[m[4]:m[5]], "{}")
			for _, mm := range matcherRE.FindAllStringSubmatch(body, -1) {
				v := strings.Trim(mm[3], `"`)
				s.matchers = append(s.matchers, matcher{name: mm[1], op: mm[2], value: v})
			}
		}
		sels = append(sels, s)
	}
	return sels, groups
}

// inString reports whether position i of q is inside a string literal.
func inString(q string, i int) bool {
	for _, loc := range stringLit.FindAllStringIndex(q, -1) {
		if i > loc[0] && i < loc[1] {
			return true
		}
	}
	return false
}

// familyLabels maps each label of the family that a selector name refers to
// (a histogram's _bucket, _sum or _count included) to the values it takes.
func familyLabels(fams map[string]*dto.MetricFamily, name string) (map[string]map[string]bool, bool) {
	f, ok := fams[name]
	histogramPart := false
	if !ok {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, cut := strings.CutSuffix(name, suffix); cut {
				if f, ok = fams[base]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
					histogramPart = suffix == "_bucket"
					break
				}
				ok = false
			}
		}
	}
	if !ok {
		return nil, false
	}
	labels := map[string]map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			if labels[lp.GetName()] == nil {
				labels[lp.GetName()] = map[string]bool{}
			}
			labels[lp.GetName()][lp.GetValue()] = true
		}
	}
	if histogramPart {
		labels["le"] = map[string]bool{}
	}
	return labels, true
}

// TestParseQuery: the scanner finds every selector of a query with its
// matchers, and the labels of its clauses, and nothing else.
func TestParseQuery(t *testing.T) {
	sels, groups := parseQuery(`100 * sum by (dependency) (rate(orderagg_dependency_events_total{event=~"failure|timeout", dependency="order"}[5m]))
    / on (dependency) group_left sum by (dependency, le) (rate(orderagg_dependency_calls_total[5m])) > 0.05`)
	want := []sel{
		{"orderagg_dependency_events_total", []matcher{{"event", "=~", "failure|timeout"}, {"dependency", "=", "order"}}},
		{"orderagg_dependency_calls_total", nil},
	}
	if len(sels) != len(want) {
		t.Fatalf("selectors %+v, want %+v", sels, want)
	}
	for i := range want {
		if sels[i].metric != want[i].metric || !slices.Equal(sels[i].matchers, want[i].matchers) {
			t.Errorf("selector %d = %+v, want %+v", i, sels[i], want[i])
		}
	}
	if !slices.Equal(groups, []string{"dependency", "dependency", "dependency", "le"}) {
		t.Errorf("clause labels %v", groups)
	}
	if got := runbookQueries("a `histogram_quantile(0.99, sum by (le) (rate(orderagg_y_bucket[5m])))` and `orderagg_x` alone\n```promql\n# comment\nsum(a_b)\n  / sum(c_d)\n```\n"); !slices.Equal(got,
		[]string{"sum(a_b) / sum(c_d)", "histogram_quantile(0.99, sum by (le) (rate(orderagg_y_bucket[5m])))"}) {
		t.Errorf("runbookQueries = %q", got)
	}
}
