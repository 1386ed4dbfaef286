package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Helpers that speak orderagg's contract (/work/shared/spec/contract.md):
// the order-detail page and its sections, the sim's fault API,
// /v1/resilience and /metrics. Everything here that may run on a goroutine
// other than the test's returns errors instead of failing the test.

const (
	// deadline is the service's default --deadline; no scenario changes it.
	deadline = 1500 * time.Millisecond
	// clientMargin is what a client on the host may see on top of the
	// service's own deadline: loopback, docker-proxy and this (race-enabled)
	// test process's scheduling on a 2-core machine. Measured here during
	// TestLoadWhileDependencyHangs (which logs it): /healthz round trips of
	// 1-2 ms at the median and 4-20 ms at worst, so 100 ms is a wide
	// allowance that still catches an answer that waited on a hung call.
	clientMargin = 100 * time.Millisecond
)

// Dependency and section names of the contract.
const (
	depOrder     = "order"
	depInventory = "inventory"
	depCoupon    = "coupon"
	depLogistics = "logistics"
	depCache     = "cache"
)

// section is one section of a 200 page; fields a section does not have stay
// empty.
type section struct {
	Source   string          `json:"source"`
	Degraded *bool           `json:"degraded"`
	Reason   string          `json:"reason"`
	AsOf     string          `json:"as_of"`
	Status   string          `json:"status"`
	Data     json.RawMessage `json:"data"`  // order
	Items    json.RawMessage `json:"items"` // inventory, coupons
}

// page is the 200 body of GET /v1/orders/{id}.
type page struct {
	OrderID   string   `json:"order_id"`
	Degraded  *bool    `json:"degraded"`
	Order     *section `json:"order"`
	Inventory *section `json:"inventory"`
	Coupons   *section `json:"coupons"`
	Logistics *section `json:"logistics"`
}

// sections returns the page's sections by the name a test reports them by.
func (p *page) sections() map[string]*section {
	return map[string]*section{
		depOrder: p.Order, depInventory: p.Inventory, depCoupon: p.Coupons, depLogistics: p.Logistics,
	}
}

// orderSKUs lists the SKUs of the order section's items.
func (p *page) orderSKUs() ([]string, error) {
	if p.Order == nil || len(p.Order.Data) == 0 {
		return nil, fmt.Errorf("no order data")
	}
	var d struct {
		ID    string `json:"id"`
		Items []struct {
			SKU string `json:"sku"`
		} `json:"items"`
	}
	if err := json.Unmarshal(p.Order.Data, &d); err != nil {
		return nil, fmt.Errorf("order data: %w", err)
	}
	skus := make([]string, 0, len(d.Items))
	for _, it := range d.Items {
		skus = append(skus, it.SKU)
	}
	return skus, nil
}

// answer is one response of GET /v1/orders/{id} as the host's client saw it.
type answer struct {
	ID      string
	Status  int
	Header  http.Header
	Body    []byte
	Latency time.Duration // request written to body read, on the host
	Page    *page         // decoded on 200
	ErrCode string        // error.code on a status ≥ 400
}

func (a answer) String() string {
	return fmt.Sprintf("GET /v1/orders/%s = %d in %v; body: %s", a.ID, a.Status, a.Latency.Round(time.Millisecond), trimBody(a.Body))
}

// fetchOrder gets one page; it fails only when no answer arrived or the body
// is not the JSON its status calls for.
func fetchOrder(ctx context.Context, c *http.Client, base, id string) (answer, error) {
	a := answer{ID: id}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/orders/"+id, nil)
	if err != nil {
		return a, err
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return a, fmt.Errorf("GET /v1/orders/%s: %w", id, err)
	}
	defer resp.Body.Close()
	a.Body, err = io.ReadAll(resp.Body)
	a.Latency = time.Since(start)
	a.Status, a.Header = resp.StatusCode, resp.Header
	if err != nil {
		return a, fmt.Errorf("GET /v1/orders/%s: read body: %w", id, err)
	}
	if a.Status == http.StatusOK {
		var p page
		if err := json.Unmarshal(a.Body, &p); err != nil {
			return a, fmt.Errorf("%v: not JSON: %w", a, err)
		}
		a.Page = &p
		return a, nil
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(a.Body, &e); err != nil {
		return a, fmt.Errorf("%v: error body not JSON: %w", a, err)
	}
	a.ErrCode = e.Error.Code
	return a, nil
}

// order gets one page on the test's goroutine, with the contract's
// invariants of any page (checkPage) already checked.
func order(t testing.TB, base, id string) answer {
	t.Helper()
	t.Cleanup(httpClient.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := fetchOrder(ctx, httpClient, base, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAnswer(a); err != nil {
		t.Fatal(err)
	}
	return a
}

var knownReasons = []string{"TIMEOUT", "FAILURE", "SHORT_CIRCUITED", "REJECTED", "DEADLINE"}

// checkAnswer checks what the contract says of every answer: it left within
// the deadline (plus the client margin), carries X-Request-Id, and a 200 is
// a well-formed page (checkPage); an error is JSON with a code.
func checkAnswer(a answer) error {
	if a.Latency > deadline+clientMargin {
		return fmt.Errorf("%v: took longer than the %v deadline + %v margin", a, deadline, clientMargin)
	}
	if a.Header.Get("X-Request-Id") == "" {
		return fmt.Errorf("%v: no X-Request-Id", a)
	}
	if a.Status != http.StatusOK {
		if a.ErrCode == "" {
			return fmt.Errorf("%v: error without error.code", a)
		}
		return nil
	}
	return checkPage(a)
}

// checkPage checks a 200 page: order_id, every section present with source
// and degraded agreeing (live ⇔ not degraded), a known reason on every
// degraded section and none on a live one, as_of (RFC 3339, not in the
// future) exactly on cached sections, the top-level degraded flag as the OR
// of the sections', and Cache-Control: no-store exactly on degraded pages.
func checkPage(a answer) error {
	p := a.Page
	if p == nil {
		return fmt.Errorf("%v: no page", a)
	}
	if p.OrderID != a.ID {
		return fmt.Errorf("%v: order_id %q", a, p.OrderID)
	}
	anyDegraded := false
	for name, s := range p.sections() {
		if s == nil {
			return fmt.Errorf("%v: section %s missing", a, name)
		}
		if s.Degraded == nil {
			return fmt.Errorf("%v: section %s has no degraded flag", a, name)
		}
		switch s.Source {
		case "live":
			if *s.Degraded || s.Reason != "" || s.AsOf != "" {
				return fmt.Errorf("%v: live section %s has degraded=%v reason=%q as_of=%q", a, name, *s.Degraded, s.Reason, s.AsOf)
			}
		case "cache", "fallback":
			if !*s.Degraded {
				return fmt.Errorf("%v: %s section %s not marked degraded", a, s.Source, name)
			}
			if !slices.Contains(knownReasons, s.Reason) {
				return fmt.Errorf("%v: section %s reason %q is none of %v", a, name, s.Reason, knownReasons)
			}
			if s.Source == "fallback" && s.AsOf != "" {
				return fmt.Errorf("%v: fallback section %s has as_of %q", a, name, s.AsOf)
			}
			if s.Source == "cache" {
				asOf, err := time.Parse(time.RFC3339, s.AsOf)
				if err != nil {
					return fmt.Errorf("%v: cached section %s as_of %q: %w", a, name, s.AsOf, err)
				}
				if asOf.After(time.Now().Add(2 * time.Second)) { // same host clock; 2s for rounding
					return fmt.Errorf("%v: cached section %s as_of %v is in the future", a, name, asOf)
				}
			}
		default:
			return fmt.Errorf("%v: section %s source %q", a, name, s.Source)
		}
		anyDegraded = anyDegraded || *s.Degraded
	}
	if p.Degraded == nil || *p.Degraded != anyDegraded {
		return fmt.Errorf("%v: top-level degraded = %v, sections say %v", a, p.Degraded, anyDegraded)
	}
	noStore := strings.Contains(a.Header.Get("Cache-Control"), "no-store")
	if noStore != anyDegraded {
		return fmt.Errorf("%v: Cache-Control %q on a page with degraded=%v", a, a.Header.Get("Cache-Control"), anyDegraded)
	}
	return nil
}

// requireHealthy fails unless every section of a 200 page is live, with the
// live shapes: the order's data is this order, inventory CONFIRMED with a
// number for every SKU, coupons a list, logistics a known status.
func requireHealthy(t testing.TB, a answer) {
	t.Helper()
	if a.Status != http.StatusOK {
		t.Fatalf("%v: want 200", a)
	}
	for name, s := range a.Page.sections() {
		if s.Source != "live" {
			t.Fatalf("%v: section %s is %s (%s), want live", a, name, s.Source, s.Reason)
		}
	}
	skus, err := a.Page.orderSKUs()
	if err != nil || len(skus) == 0 {
		t.Fatalf("%v: order items: %v (%d SKUs)", a, err, len(skus))
	}
	if a.Page.Inventory.Status != "CONFIRMED" {
		t.Errorf("%v: live inventory status %q, want CONFIRMED", a, a.Page.Inventory.Status)
	}
	items, err := inventoryItems(a.Page.Inventory)
	if err != nil {
		t.Fatalf("%v: %v", a, err)
	}
	for _, it := range items {
		if _, ok := it["available"].(float64); !ok {
			t.Errorf("%v: live inventory item %v has no number available", a, it)
		}
	}
	var coupons []json.RawMessage
	if err := json.Unmarshal(a.Page.Coupons.Items, &coupons); err != nil || coupons == nil {
		t.Errorf("%v: live coupons items not a list: %v", a, err)
	}
	if s := a.Page.Logistics.Status; s == "" || s == "UNKNOWN" {
		t.Errorf("%v: live logistics status %q", a, s)
	}
}

// requireSection fails unless section dep of a 200 page has that source and
// reason (reason "" for live).
func requireSection(t testing.TB, a answer, dep, source, reason string) *section {
	t.Helper()
	if a.Status != http.StatusOK {
		t.Fatalf("%v: want 200", a)
	}
	s := a.Page.sections()[dep]
	if s.Source != source || s.Reason != reason {
		t.Fatalf("%v: section %s is source=%q reason=%q, want source=%q reason=%q", a, dep, s.Source, s.Reason, source, reason)
	}
	return s
}

// requireFallbackShape fails unless section dep of a 200 page is the
// contract's semantic default: inventory UNKNOWN with one item per order SKU,
// each with available null (never 0) and status UNKNOWN; coupons an empty
// list (not null); logistics UNKNOWN.
func requireFallbackShape(t testing.TB, a answer, dep string) {
	t.Helper()
	s := a.Page.sections()[dep]
	switch dep {
	case depInventory:
		if s.Status != "UNKNOWN" {
			t.Errorf("%v: fallback inventory status %q, want UNKNOWN", a, s.Status)
		}
		skus, err := a.Page.orderSKUs()
		if err != nil {
			t.Fatalf("%v: %v", a, err)
		}
		items, err := inventoryItems(s)
		if err != nil {
			t.Fatalf("%v: %v", a, err)
		}
		var got []string
		for _, it := range items {
			sku, _ := it["sku"].(string)
			got = append(got, sku)
			if v, ok := it["available"]; !ok || v != nil {
				t.Errorf("%v: fallback inventory item %v: available must be present and null", a, it)
			}
			if it["status"] != "UNKNOWN" {
				t.Errorf("%v: fallback inventory item %v: status must be UNKNOWN", a, it)
			}
		}
		slices.Sort(got)
		skus = slices.Clone(skus)
		slices.Sort(skus)
		if !slices.Equal(got, skus) {
			t.Errorf("%v: fallback inventory SKUs %v, want the order's %v", a, got, skus)
		}
	case depCoupon:
		if strings.TrimSpace(string(s.Items)) != "[]" {
			t.Errorf("%v: fallback coupons items = %s, want []", a, s.Items)
		}
	case depLogistics:
		if s.Status != "UNKNOWN" {
			t.Errorf("%v: fallback logistics status %q, want UNKNOWN", a, s.Status)
		}
	default:
		t.Fatalf("no fallback shape for %s", dep)
	}
}

func inventoryItems(s *section) ([]map[string]any, error) {
	var items []map[string]any
	if err := json.Unmarshal(s.Items, &items); err != nil {
		return nil, fmt.Errorf("inventory items: %w", err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("inventory has no items")
	}
	return items, nil
}

// setFault sets one service's faults on a sim container (PUT
// /faults/{service}); body is the contract's JSON, e.g. `{"hang":true}`.
func setFault(t testing.TB, simURL, service, body string) {
	t.Helper()
	simCall(t, http.MethodPut, simURL+"/faults/"+service, body)
}

// clearFaults puts every service of a sim container back to healthy.
func clearFaults(t testing.TB, simURL string) {
	t.Helper()
	simCall(t, http.MethodDelete, simURL+"/faults", "")
}

func simCall(t testing.TB, method, url, body string) {
	t.Helper()
	t.Cleanup(httpClient.CloseIdleConnections)
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s %s = %d; body: %s", method, url, body, resp.StatusCode, trimBody(b))
	}
}

// simRequests returns how many requests a sim container's service has
// received (GET /stats).
func simRequests(ctx context.Context, simURL, service string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, simURL+"/stats", nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var stats map[string]struct {
		Requests int `json:"requests"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		return 0, fmt.Errorf("sim /stats: %w", err)
	}
	return stats[service].Requests, nil
}

// resilienceEntry is the part of one dependency's /v1/resilience entry the
// scenarios read.
type resilienceEntry struct {
	Name    string           `json:"name"`
	Breaker string           `json:"breaker"`
	Counts  map[string]int64 `json:"counts"`
	// TimeoutMS is the sub-budget in force.
	TimeoutMS float64 `json:"timeout_ms"`
}

// resilience returns each dependency's entry of GET /v1/resilience.
func resilience(ctx context.Context, base string) (map[string]resilienceEntry, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/resilience", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/resilience = %d: %s", resp.StatusCode, trimBody(b))
	}
	var r struct {
		Dependencies []resilienceEntry `json:"dependencies"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("GET /v1/resilience: %w", err)
	}
	out := make(map[string]resilienceEntry, len(r.Dependencies))
	for _, d := range r.Dependencies {
		out[d.Name] = d
	}
	for _, dep := range []string{depOrder, depInventory, depCoupon, depLogistics, depCache} {
		if out[dep].Breaker == "" {
			return nil, fmt.Errorf("GET /v1/resilience: no breaker for %s: %s", dep, trimBody(b))
		}
	}
	return out, nil
}

// resilienceOf is one dependency's /v1/resilience entry, read on the test's
// goroutine.
func resilienceOf(t testing.TB, base, dep string) resilienceEntry {
	t.Helper()
	t.Cleanup(httpClient.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	all, err := resilience(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	return all[dep]
}

// breakerState is one dependency's breaker state from /v1/resilience.
func breakerState(t testing.TB, base, dep string) string {
	t.Helper()
	return resilienceOf(t, base, dep).Breaker
}

// sample is one line of the Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrape reads GET /metrics.
func scrape(t testing.TB, base string) []sample {
	t.Helper()
	resp, body := get(t, base+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d; body: %s", resp.StatusCode, trimBody(body))
	}
	var out []sample
	for _, line := range bytes.Split(body, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		m := sampleLine.FindSubmatch(line)
		if m == nil {
			t.Fatalf("GET /metrics: unparsable line %q", line)
		}
		v, err := strconv.ParseFloat(string(m[3]), 64)
		if err != nil {
			t.Fatalf("GET /metrics: value of %q: %v", line, err)
		}
		s := sample{name: string(m[1]), labels: map[string]string{}, value: v}
		for _, p := range labelPair.FindAllSubmatch(m[2], -1) {
			s.labels[string(p[1])] = string(p[2])
		}
		out = append(out, s)
	}
	return out
}

// metric sums the samples named name whose labels include every pair of
// want; found is false when there is none.
func metric(samples []sample, name string, want map[string]string) (sum float64, found bool) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
				break
			}
		}
		if match {
			sum += s.value
			found = true
		}
	}
	return sum, found
}

// goroutines reads go_goroutines from the service's /metrics.
func goroutines(t testing.TB, base string) int {
	t.Helper()
	v, ok := metric(scrape(t, base), "go_goroutines", nil)
	if !ok {
		t.Fatal("GET /metrics has no go_goroutines")
	}
	return int(v)
}

// lastGoodKey is the Redis key of a dependency's last good answer for an
// order (docs/design.md, "Keys and values").
func lastGoodKey(dep, id string) string { return "orderagg:v1:lastgood:" + dep + ":" + id }

// waitForKeys waits until every key exists in the Redis at addr (a host
// address); the service writes last-good answers after answering.
func waitForKeys(t testing.TB, addr string, keys ...string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = rdb.Close() }()
	var n int64
	var err error
	eventually(t, 10*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		n, err = rdb.Exists(ctx, keys...).Result()
		return err == nil && n == int64(len(keys)), fmt.Sprintf("%d of %v in Redis (err %v)", n, keys, err)
	})
}

// keyExists reports whether key is in the Redis at addr (a host address);
// an unreachable Redis reports false.
func keyExists(t testing.TB, addr, key string) bool {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = rdb.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	n, err := rdb.Exists(ctx, key).Result()
	return err == nil && n == 1
}

// redisPing sends one PING to the Redis at addr (a host address).
func redisPing(addr string) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = rdb.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

// eventually polls cond every 50 ms until it reports true, failing the test
// with cond's last message when timeout passes first.
func eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", timeout, msg)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, bounded by timeout
	}
}

// percentile returns the p-th percentile (0 < p ≤ 100, nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// ms formats a duration in milliseconds with one decimal for the logs.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + "ms"
}
