package app

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

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
