package app

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/orderagg/orderagg/internal/config"
)

// TestMetricsLint: the /metrics of a service that has served live, cached
// and degraded answers (so that every family has series, the Redis pool's
// timings included) passes Prometheus's linter with no problem at all:
// base units (seconds, not ms or ns), _total on counters, no reserved
// suffixes on gauges, help text everywhere.
func TestMetricsLint(t *testing.T) {
	s, _ := startService(t, nil, func(c *config.Serve) { hangBudgets("logistics")(c); patientCache(c) })
	s.getLive("/v1/orders/o-1") // live: remembered
	s.fault("logistics", `{"hang":true}`)
	s.fault("coupon", `{"error_rate":1}`)
	waitUntil(t, func() bool { return sec(s.get("/v1/orders/o-1"), "logistics")["source"] == "cache" })
	s.get("/v1/orders/o-404404") // never seen: a cache miss
	a := s.get("/v1/orders/o-2")
	if a.status != http.StatusOK {
		t.Fatalf("order detail: %d %v", a.status, a.body)
	}

	text := s.metricsText()
	problems, err := promlint.New(bytes.NewReader([]byte(text))).Lint()
	if err != nil {
		t.Fatalf("promlint could not parse /metrics: %v", err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
}

// queriedCounter matches an orderagg counter's name in a rule, dashboard or
// runbook. (The Redis pool's db_client_* series exist only with --redis-url.)
var queriedCounter = regexp.MustCompile(`\borderagg_[a-z0-9_]*_total\b`)

// TestCountersExistFromStartUp scrapes a service that has served nothing:
// every counter that docs/runbook.md, the rules in deploy/prometheus and the
// dashboards in deploy/grafana query is there, and orderagg_http_requests_total
// has a series at 0 for every status × degraded pair the order-detail
// handler writes, so a ratio over it reads 0, not "no data", after a deploy.
func TestCountersExistFromStartUp(t *testing.T) {
	s, _ := startService(t, nil, nil)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(s.metricsText()))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../deploy/prometheus/*.y*ml")
	dashboards, _ := filepath.Glob("../../deploy/grafana/*.json")
	files = append(append(files, dashboards...), "../../docs/runbook.md")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range queriedCounter.FindAllString(string(raw), -1) {
			if fam, ok := fams[name]; !ok || fam.GetType() != dto.MetricType_COUNTER {
				t.Errorf("%s queries %s, which a fresh process does not export as a counter", f, name)
			}
		}
	}
	answers := map[string]bool{}
	for _, m := range fams["orderagg_http_requests_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if m.GetCounter().GetValue() == 0 {
			answers[labels["status"]+"/"+labels["degraded"]] = true
		}
	}
	for _, want := range []string{"200/false", "200/true", "400/false", "404/false", "500/false", "503/false"} {
		if !answers[want] {
			t.Errorf("orderagg_http_requests_total{status/degraded=%s} is not at 0 from start-up (have %v)", want, answers)
		}
	}
	for _, dep := range config.DefaultDependencies().Names() {
		for _, ev := range []string{"success", "failure", "timeout", "short_circuited", "rejected", "fallback_success", "fallback_failure", "cache_hit"} {
			if !hasZero(fams["orderagg_dependency_events_total"], map[string]string{"dependency": dep, "event": ev}) {
				t.Errorf("orderagg_dependency_events_total{dependency=%q,event=%q} is not at 0 from start-up", dep, ev)
			}
		}
	}
}

// hasZero reports whether f has a series at 0 whose labels are exactly want.
func hasZero(f *dto.MetricFamily, want map[string]string) bool {
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) || m.GetCounter().GetValue() != 0 {
			continue
		}
		for _, l := range m.GetLabel() {
			if want[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		return true
	}
	return false
}
