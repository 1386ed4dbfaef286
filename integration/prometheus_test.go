package integration

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
	"go.yaml.in/yaml/v3"
)

// promDir holds the rules that ship with the service.
const promDir = "../deploy/prometheus"

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readRuleFile(t *testing.T, name string) ruleFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(promDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// TestAlertsPointAtTheirRunbookSection: every alert carries summary,
// description, severity and a runbook_url whose anchor is a heading of
// docs/runbook.md named after the alert, and the runbook's alert table lists
// it. An operator paged at night must land on the section that handles it.
func TestAlertsPointAtTheirRunbookSection(t *testing.T) {
	doc, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	runbook := string(doc)
	anchors := map[string]bool{}
	heading := regexp.MustCompile(`(?m)^#{2,4} (.+)$`)
	for _, h := range heading.FindAllStringSubmatch(runbook, -1) {
		anchors[githubAnchor(h[1])] = true
	}
	const base = "https://github.com/orderagg/orderagg/blob/main/docs/runbook.md#"
	var alerts []string
	for _, g := range readRuleFile(t, "alerts.yaml").Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: alerts.yaml holds a recording rule %q; put it in rules.yaml", g.Name, r.Record)
				continue
			}
			alerts = append(alerts, r.Alert)
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, k)
				}
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], base)
			switch {
			case !ok:
				t.Errorf("%s: runbook_url %q is not under %s", r.Alert, r.Annotations["runbook_url"], base)
			case anchor != strings.ToLower(r.Alert):
				t.Errorf("%s: runbook_url anchor %q, want its own section #%s", r.Alert, anchor, strings.ToLower(r.Alert))
			case !anchors[anchor]:
				t.Errorf("%s: docs/runbook.md has no heading for #%s", r.Alert, anchor)
			}
			if !strings.Contains(runbook, "| `"+r.Alert+"` |") {
				t.Errorf("%s is not in the runbook's alert table", r.Alert)
			}
		}
	}
	if len(alerts) < 10 {
		t.Errorf("found only %d alerts: %v", len(alerts), alerts)
	}
	slices.Sort(alerts)
	if c := slices.Compact(slices.Clone(alerts)); len(c) != len(alerts) {
		t.Errorf("an alert name is used twice: %v", alerts)
	}
}

// githubAnchor is the fragment GitHub gives a Markdown heading: lower case,
// punctuation dropped, spaces to hyphens.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

const (
	defaultPrometheusImage = "orderagg-prometheus:local"
	prometheusAlias        = "prometheus"
	prometheusPort         = "9090/tcp"
	// prometheusJob is the scrape job the suite's Prometheus names orderagg by.
	prometheusJob = "orderagg"
	// forScale shortens every alert's `for:` in the suite's copy of
	// alerts.yaml: 5m becomes 5 s. With a scrape and a rule evaluation a
	// second, a pending phase still spans several evaluations.
	forScale = 60
	// dashboardFile is the Grafana dashboard whose queries the suite runs.
	dashboardFile = "../deploy/grafana/orderagg.json"
)

// promConfig gives each last-good read 250 ms instead of 50 ms (each
// fallback_timeout must exceed it, and so must --reserve, promReserve), and
// the test's Redis URL gives the client 1 s timeouts: the test asserts that
// no alert is raised for the cache, so a Redis container that is slow to
// answer on a loaded machine must not count as a sick cache.
const (
	promReserve = "350ms"
	promConfig  = `
dependencies:
  cache:
    timeout: 250ms
  order:
    fallback_timeout: 300ms
  inventory:
    fallback_timeout: 300ms
  coupon:
    fallback_timeout: 300ms
  logistics:
    fallback_timeout: 300ms
`
)

// TestPrometheusAlertsAndDashboard runs the rules of deploy/prometheus in a
// real Prometheus (the orderagg-prometheus image, ORDERAGG_PROMETHEUS_IMAGE)
// scraping a real orderagg every second, with the alerts' `for:` divided by
// forScale.
//
//   - Healthy: pages of existing and of nf- (404) orders. Every error ratio
//     the alerts read is 0, and no alert is pending or firing at any point.
//   - Logistics hangs (the sim's fault API): OrderaggBreakerOpen
//     {dependency=logistics} goes pending, then firing, and so do the
//     alerts a hung section must raise; nothing else.
//   - The SLO recording rules hold the ratios the service's own counters
//     give (every window covers the whole run), and the burn rates follow.
//   - Every query of deploy/grafana/orderagg.json, its template variables
//     substituted, returns data.
func TestPrometheusAlertsAndDashboard(t *testing.T) {
	suiteStart := time.Now()
	promImage := envOr("ORDERAGG_PROMETHEUS_IMAGE", defaultPrometheusImage)
	requireImages(t, images().Service, images().Redis, promImage)
	nw := newNetwork(t)
	startRedis(t, nw)
	_, simURL := startSim(t, nw)
	_, base := startService(t, nw, map[string]string{
		"ORDERAGG_RESERVE":   promReserve,
		"ORDERAGG_REDIS_URL": "redis://" + redisAlias + ":6379/0?dial_timeout=1s&read_timeout=1s&write_timeout=1s",
	}, withConfig(promConfig))
	prom := startPrometheus(t, nw, promImage)
	t.Logf("containers up in %v", time.Since(suiteStart).Round(time.Millisecond))

	// The first scrape lands before any page: every series a ratio reads
	// starts at 0, so rate() over a window that covers the run extrapolates
	// all of them alike and the ratios are exact.
	eventually(t, 30*time.Second, func() (bool, string) {
		v, ok := prom.scalar(t, `sum(orderagg_http_requests_total{job="`+prometheusJob+`"})`)
		return ok && v == 0, fmt.Sprintf("Prometheus has not scraped orderagg's zero counters (found %v: %v)", ok, v)
	})

	// Healthy.
	healthy := startTraffic(t, base, "o-pm", "nf-pm")
	quiet := time.Now().Add(12 * time.Second)
	for time.Now().Before(quiet) {
		require.Empty(t, prom.activeAlerts(t), "alerts while everything is healthy")
		time.Sleep(250 * time.Millisecond) // poll interval of the check above
	}
	served := healthy.stop(t)
	require.NotZero(t, served.byStatus[http.StatusNotFound], "no nf- page was served")
	prom.waitForCounts(t, base)
	for _, q := range []string{
		`orderagg:slo_errors:ratio_rate5m`,
		`orderagg:dependency_fallbacks:ratio_rate5m`,
		`orderagg:dependency_timeouts:ratio_rate5m`,
	} {
		got := prom.query(t, q)
		require.NotEmpty(t, got, "healthy: no %s", q)
		for _, s := range got {
			// NaN: a guard without calls (the cache's, with no fallback to serve).
			assert.Truef(t, s.value == 0 || math.IsNaN(s.value) && s.metric["dependency"] == depCache,
				"healthy: %s%v = %v, want 0", q, s.metric, s.value)
		}
	}
	require.Empty(t, prom.activeAlerts(t), "alerts after the healthy phase")
	t.Logf("healthy: %d pages (%v), no alert pending or firing", served.total, served.byStatus)

	// Logistics hangs.
	setFault(t, simURL, depLogistics, `{"hang":true}`)
	t.Cleanup(func() { clearFaults(t, simURL) })
	hangStart := time.Now()
	hung := startTraffic(t, base, "o-pm", "nf-pm")
	t.Cleanup(func() { hung.stop(t) })
	want := map[string]bool{ // the alerts a hung logistics must raise, and no other
		"OrderaggBreakerOpen{logistics}":        true,
		"OrderaggFallbackRateHigh{logistics}":   true,
		"OrderaggDependencyTimeouts{logistics}": true,
		"OrderaggCompletenessFastBurn":          true,
		"OrderaggCompletenessSlowBurn":          true,
	}
	pending, firing := map[string]time.Duration{}, map[string]time.Duration{}
	eventually(t, 90*time.Second, func() (bool, string) {
		for _, a := range prom.activeAlerts(t) {
			key := a.Labels["alertname"]
			if dep := a.Labels["dependency"]; dep != "" {
				key += "{" + dep + "}"
			}
			require.Truef(t, want[key], "alert %s %s while logistics hangs: %v", key, a.State, a.Labels)
			at := time.Since(hangStart)
			if _, ok := pending[key]; !ok {
				pending[key] = at // firing without a pending phase seen counts as pending too
			}
			if _, ok := firing[key]; !ok && a.State == "firing" {
				firing[key] = at
			}
		}
		return len(firing) == len(want), fmt.Sprintf("while logistics hangs, %v fired of %v", slices.Sorted(maps.Keys(firing)), slices.Sorted(maps.Keys(want)))
	})
	served = served.add(hung.stop(t))
	for _, k := range slices.Sorted(maps.Keys(firing)) {
		t.Logf("hang: %-39s pending after %5.1fs, firing after %5.1fs", k, pending[k].Seconds(), firing[k].Seconds())
	}
	bo := "OrderaggBreakerOpen{logistics}"
	require.Less(t, pending[bo], firing[bo], "OrderaggBreakerOpen was never seen pending before firing")

	// The SLO ratios, from the service's own counters.
	m := prom.waitForCounts(t, base)
	total, _ := metric(m, "orderagg_http_requests_total", nil)
	fivexx := 0.0
	for _, s := range m {
		if s.name == "orderagg_http_requests_total" && strings.HasPrefix(s.labels["status"], "5") {
			fivexx += s.value
		}
	}
	ok200, _ := metric(m, "orderagg_http_requests_total", map[string]string{"status": "200"})
	degraded, _ := metric(m, "orderagg_http_requests_total", map[string]string{"status": "200", "degraded": "true"})
	require.NotZero(t, degraded, "no degraded page while logistics hung")
	expected := map[string]float64{"availability": fivexx / total, "completeness": degraded / ok200}
	objectives := map[string]float64{}
	for _, s := range prom.query(t, `orderagg:slo_objective:ratio`) {
		objectives[s.metric["slo"]] = s.value
	}
	require.Equal(t, map[string]float64{"availability": 0.999, "completeness": 0.99}, objectives, "orderagg:slo_objective:ratio")
	for _, w := range []string{"5m", "30m", "1h", "2h", "6h", "1d", "3d"} {
		rule := "orderagg:slo_errors:ratio_rate" + w
		for slo, v := range expected {
			q := fmt.Sprintf(`%s{slo=%q,job=%q}`, rule, slo, prometheusJob)
			got, ok := prom.scalar(t, q)
			require.True(t, ok, "no %s", q)
			assert.InDeltaf(t, v, got, 1e-9, "%s (the service's counters: %v 5xx of %v answers, %v degraded of %v pages)", q, fivexx, total, degraded, ok200)
			burn, ok := prom.scalar(t, q+` / on (slo) group_left () (1 - orderagg:slo_objective:ratio)`)
			require.True(t, ok, "no burn rate for %s", q)
			assert.InDeltaf(t, v/(1-objectives[slo]), burn, 1e-6, "burn rate of %s", q)
		}
	}
	t.Logf("SLO ratios: availability %v (%v 5xx of %v answers, %d of them 404), completeness %.4f (%v degraded of %v pages): burn rates %.1f and %.1f",
		expected["availability"], fivexx, total, served.byStatus[http.StatusNotFound], expected["completeness"], degraded, ok200,
		expected["availability"]/(1-objectives["availability"]), expected["completeness"]/(1-objectives["completeness"]))

	// The dashboard.
	d := readDashboard(t)
	vars := map[string]string{"job": prometheusJob, "dependency": depLogistics}
	for _, v := range d.variables {
		got := prom.query(t, fmt.Sprintf("group by (%s) (%s)", v.label, substitute(v.metric, vars)))
		values := make([]string, 0, len(got))
		for _, s := range got {
			values = append(values, s.metric[v.label])
		}
		assert.Containsf(t, values, vars[v.name], "template variable %s: label_values(%s, %s)", v.name, v.metric, v.label)
	}
	withData := 0
	for _, q := range d.queries {
		expr := substitute(q.expr, vars)
		if got := prom.query(t, expr); assert.NotEmptyf(t, got, "dashboard panel %q: no data for %s", q.panel, expr) {
			withData++
		}
	}
	t.Logf("dashboard: %d panels, %d of %d queries returned data (dependency=%s)", d.panels, withData, len(d.queries), depLogistics)
	t.Logf("suite: %d pages in all, %v from the first container", served.total, time.Since(suiteStart).Round(time.Second))
}

// startPrometheus runs the Prometheus image on nw with the suite's
// configuration: orderagg scraped and the rules evaluated every second,
// deploy/prometheus/rules.yaml as it is and alerts.yaml with every `for:`
// divided by forScale.
func startPrometheus(t *testing.T, nw *testcontainers.DockerNetwork, image string) *promAPI {
	t.Helper()
	rules, err := os.ReadFile(filepath.Join(promDir, "rules.yaml"))
	require.NoError(t, err)
	alerts, err := os.ReadFile(filepath.Join(promDir, "alerts.yaml"))
	require.NoError(t, err)
	alerts = shortenFor(t, alerts, forScale)
	config := fmt.Sprintf(`
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [/etc/prometheus/rules/*.yaml]
scrape_configs:
  - job_name: %s
    static_configs:
      - targets: ["%s:8080"]
`, prometheusJob, serviceAlias)
	file := func(content []byte, path string) testcontainers.ContainerFile {
		return testcontainers.ContainerFile{Reader: bytes.NewReader(content), ContainerFilePath: path, FileMode: 0o644}
	}
	c := run(t, image, prometheusAlias, nw,
		// The flags in full, as compose.yaml gives them: prom/prometheus
		// takes the same ones.
		testcontainers.WithCmd("--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"),
		testcontainers.WithFiles(
			file([]byte(config), "/etc/prometheus/prometheus.yml"),
			file(rules, "/etc/prometheus/rules/rules.yaml"),
			file(alerts, "/etc/prometheus/rules/alerts.yaml"),
		),
		testcontainers.WithExposedPorts(prometheusPort),
		testcontainers.WithWaitStrategy(
			wait.ForHTTP("/-/ready").WithPort(prometheusPort).WithStartupTimeout(startupTimeout),
		),
	)
	p := &promAPI{base: "http://" + endpoint(t, c, prometheusPort)}
	// Every group of both files loaded: a rule file Prometheus could not
	// read would leave it running without them.
	var groups int
	for _, f := range []string{"rules.yaml", "alerts.yaml"} {
		groups += len(readRuleFile(t, f).Groups)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		n := len(p.ruleGroups(t))
		return n == groups, fmt.Sprintf("Prometheus loaded %d of the %d rule groups of %s", n, groups, promDir)
	})
	return p
}

// shortenFor divides every `for:` of an alerting-rule file by scale and
// returns the file re-encoded; the rest is untouched.
func shortenFor(t *testing.T, file []byte, scale int) []byte {
	t.Helper()
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(file, &doc))
	n := 0
	var walk func(*yaml.Node)
	walk = func(nd *yaml.Node) {
		if nd.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(nd.Content); i += 2 {
				if k, v := nd.Content[i], nd.Content[i+1]; k.Value == "for" && v.Kind == yaml.ScalarNode {
					d, err := time.ParseDuration(v.Value)
					require.NoErrorf(t, err, "for: %q", v.Value)
					v.Value = (d / time.Duration(scale)).String()
					n++
				}
			}
		}
		for _, c := range nd.Content {
			walk(c)
		}
	}
	walk(&doc)
	require.NotZero(t, n, "no for: in the alerts")
	out, err := yaml.Marshal(&doc)
	require.NoError(t, err)
	return out
}

// traffic asks pages one after another on its own goroutine, every 25 ms,
// until stopped: 20 existing orders in turn and, every fifth page, an nf-
// order (404). Stop lets the page in flight finish: a page whose caller
// left would count as a 503 against the availability SLO.
type traffic struct {
	stopping context.CancelFunc
	done     chan struct{}
	counts   pageCounts
}

// pageCounts is what a traffic run was answered.
type pageCounts struct {
	total    int
	byStatus map[int]int
	err      error // the first answer that broke the contract
}

func (c pageCounts) add(o pageCounts) pageCounts {
	out := pageCounts{total: c.total + o.total, byStatus: map[int]int{}, err: cmp.Or(c.err, o.err)}
	for s, n := range c.byStatus {
		out.byStatus[s] += n
	}
	for s, n := range o.byStatus {
		out.byStatus[s] += n
	}
	return out
}

func startTraffic(t *testing.T, base, prefix, notFoundPrefix string) *traffic {
	ctx, stopping := context.WithCancel(context.Background())
	tr := &traffic{stopping: stopping, done: make(chan struct{}), counts: pageCounts{byStatus: map[int]int{}}}
	t.Cleanup(func() { stopping(); <-tr.done }) // a test that fails before stop still waits for its traffic
	go func() {
		defer close(tr.done)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			id := fmt.Sprintf("%s%03d", prefix, i%20)
			if i%5 == 4 {
				id = fmt.Sprintf("%s%03d", notFoundPrefix, i%20)
			}
			a, err := fetchOrder(context.Background(), httpClient, base, id) // httpClient's timeout bounds it
			if err == nil {
				err = checkAnswer(a)
			}
			if err != nil {
				tr.counts.err = cmp.Or(tr.counts.err, err)
				continue
			}
			tr.counts.total++
			tr.counts.byStatus[a.Status]++
		}
	}()
	return tr
}

// stop ends the traffic, waits for its goroutine and fails the test if an
// answer broke the contract. It may be called again.
func (tr *traffic) stop(t *testing.T) pageCounts {
	t.Helper()
	tr.stopping()
	<-tr.done
	httpClient.CloseIdleConnections()
	require.NoError(t, tr.counts.err)
	return tr.counts
}

// promAPI is a client of Prometheus' HTTP API.
type promAPI struct{ base string }

type promSample struct {
	metric map[string]string
	value  float64
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"` // pending or firing
}

func (p *promAPI) get(t *testing.T, path string, params url.Values, data any) {
	t.Helper()
	resp, body := get(t, p.base+path+"?"+params.Encode())
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	require.NoErrorf(t, json.Unmarshal(body, &env), "GET %s: %s", path, trimBody(body))
	require.Equalf(t, "success", env.Status, "GET %s?%s = %d: %s", path, params.Encode(), resp.StatusCode, env.Error)
	require.NoError(t, json.Unmarshal(env.Data, data))
}

// query evaluates an instant query; a scalar comes back as one sample.
func (p *promAPI) query(t *testing.T, q string) []promSample {
	t.Helper()
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	p.get(t, "/api/v1/query", url.Values{"query": {q}}, &data)
	value := func(v [2]any) float64 {
		s, _ := v[1].(string)
		f, err := strconv.ParseFloat(s, 64)
		require.NoErrorf(t, err, "%s: value %v", q, v)
		return f
	}
	switch data.ResultType {
	case "scalar":
		var v [2]any
		require.NoError(t, json.Unmarshal(data.Result, &v))
		return []promSample{{metric: map[string]string{}, value: value(v)}}
	case "vector":
		var vs []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		require.NoError(t, json.Unmarshal(data.Result, &vs))
		out := make([]promSample, 0, len(vs))
		for _, v := range vs {
			out = append(out, promSample{metric: v.Metric, value: value(v.Value)})
		}
		return out
	}
	t.Fatalf("%s: result type %q", q, data.ResultType)
	return nil
}

// scalar is the value of a query that returns one sample; ok is false for
// none.
func (p *promAPI) scalar(t *testing.T, q string) (float64, bool) {
	t.Helper()
	got := p.query(t, q)
	require.LessOrEqualf(t, len(got), 1, "%s: more than one sample", q)
	if len(got) == 0 {
		return 0, false
	}
	return got[0].value, true
}

func (p *promAPI) activeAlerts(t *testing.T) []promAlert {
	t.Helper()
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	p.get(t, "/api/v1/alerts", nil, &data)
	return data.Alerts
}

type promGroup struct {
	Name           string    `json:"name"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

func (p *promAPI) ruleGroups(t *testing.T) []promGroup {
	t.Helper()
	var data struct {
		Groups []promGroup `json:"groups"`
	}
	p.get(t, "/api/v1/rules", nil, &data)
	return data.Groups
}

// waitForCounts waits until Prometheus holds the page counters the service
// shows (no traffic may run; a page whose caller left may still finish) and
// has evaluated every rule group since, and returns the service's /metrics.
func (p *promAPI) waitForCounts(t *testing.T, base string) []sample {
	t.Helper()
	var (
		m    []sample
		seen time.Time
	)
	eventually(t, 15*time.Second, func() (bool, string) {
		m = scrape(t, base)
		total, _ := metric(m, "orderagg_http_requests_total", nil)
		v, ok := p.scalar(t, `sum(orderagg_http_requests_total{job="`+prometheusJob+`"})`)
		seen = time.Now()
		return ok && v == total, fmt.Sprintf("Prometheus holds %v answers, the service counted %v", v, total)
	})
	eventually(t, 15*time.Second, func() (bool, string) {
		for _, g := range p.ruleGroups(t) {
			if !g.LastEvaluation.After(seen) {
				return false, fmt.Sprintf("rule group %s last evaluated at %v, before the last scrape was seen at %v", g.Name, g.LastEvaluation, seen)
			}
		}
		return true, ""
	})
	return m
}

// dashboard is what the suite reads of a Grafana dashboard.
type dashboard struct {
	panels    int // panels that are not rows
	queries   []dashQuery
	variables []dashVariable // query variables, label_values(metric, label)
}

type dashQuery struct{ panel, expr string }

type dashVariable struct{ name, metric, label string }

type grafanaPanel struct {
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Panels  []grafanaPanel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var raw struct {
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"` // a query variable's {"query": …}
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(b, &raw))
	var d dashboard
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			d.panels++
			require.NotEmptyf(t, p.Targets, "panel %q has no query", p.Title)
			for _, q := range p.Targets {
				require.NotEmptyf(t, q.Expr, "panel %q: a target without expr", p.Title)
				d.queries = append(d.queries, dashQuery{p.Title, q.Expr})
			}
		}
	}
	walk(raw.Panels)
	for _, v := range raw.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		require.NoErrorf(t, json.Unmarshal(v.Query, &q), "template variable %s", v.Name)
		m := labelValues.FindStringSubmatch(q.Query)
		require.NotNilf(t, m, "template variable %s: query %q is not label_values(metric, label)", v.Name, q.Query)
		d.variables = append(d.variables, dashVariable{v.Name, m[1], m[2]})
	}
	return d
}

// substitute replaces Grafana's $name and ${name} by vars' values.
func substitute(expr string, vars map[string]string) string {
	for k, v := range vars {
		expr = strings.ReplaceAll(expr, "${"+k+"}", v)
		expr = strings.ReplaceAll(expr, "$"+k, v)
	}
	return expr
}
