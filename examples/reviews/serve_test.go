package reviews_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderagg/orderagg/examples/reviews"
	"github.com/orderagg/orderagg/internal/app"
	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/downstream"
)

// registered returns the registry's reviews entry, skipping the test when
// there is none: in the shipped tree reviews is only an example. The
// integration suite's TestReviewsRegistered applies register.patch (the
// guide's changes) to a copy of the repository and runs this test there.
func registered(t *testing.T) downstream.Entry {
	t.Helper()
	for _, d := range downstream.Registered() {
		if d.Name == reviews.Entry.Name {
			return d
		}
	}
	t.Skip("reviews is not registered; integration's TestReviewsRegistered runs this test with register.patch applied")
	return downstream.Entry{}
}

// The registered entry is the example's: the patch and the package describe
// one dependency.
func TestRegisteredEntryIsTheExample(t *testing.T) {
	d := registered(t)
	if d.Section != reviews.Entry.Section || d.Core || d.CacheMaxAge != reviews.Entry.CacheMaxAge ||
		d.Defaults.WithDefaults() != reviews.Entry.Defaults.WithDefaults() ||
		d.About != reviews.Entry.About || !maps.Equal(d.Why, reviews.Entry.Why) {
		t.Fatalf("registered %+v\nexample    %+v", d, reviews.Entry)
	}
	if names := downstream.Names(); names[len(names)-1] != "reviews" {
		t.Errorf("names %v: reviews goes after logistics, last on the page", names)
	}
}

// The whole service (app.Serve in embedded demo mode: flags, the registry
// loop, the simulator, the last-good cache, the admin API) with reviews
// registered: the page gains a live reviews section equal to what the
// simulator says; /v1/resilience, the admin API and the --config keys know
// it; a failing reviews service degrades only that section, to its
// last-good copy or, for an order never seen, to the semantic default.
func TestServeWithReviewsRegistered(t *testing.T) {
	registered(t)
	const token = "reviews-admin-token-0123"
	cfg, err := config.ParseServeArgs([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--admin-token", token})
	if err != nil {
		t.Fatal(err)
	}
	if dep, ok := cfg.Dependencies.Get("reviews"); !ok || dep.Timeout != 250*time.Millisecond || dep.CacheMaxAge != 10*time.Minute {
		t.Fatalf("config's reviews settings %+v, %v", dep, ok)
	}
	addrs := serve(t, cfg)
	api, sim, admin := "http://"+addrs.API, "http://"+addrs.Sim, "http://"+addrs.Admin

	var want struct {
		Reviews []reviews.Review `json:"reviews"`
		Average *float64         `json:"average"`
	}
	if st, body := get(t, sim+"/reviews/v1/orders/o-1001/reviews"); st != http.StatusOK || json.Unmarshal(body, &want) != nil {
		t.Fatalf("simulator: %d %s", st, body)
	}

	// Live.
	page := order(t, api, "o-1001")
	live := page.section(t, "reviews")
	if live.Source != "live" || live.Degraded || page.Degraded || !slices.Equal(live.Items, want.Reviews) || !sameAverage(live.Average, want.Average) {
		t.Fatalf("live reviews %+v, simulator %+v", live, want)
	}
	t.Logf("o-1001: %d reviews, average %v", len(live.Items), fmtPtr(live.Average))

	// /v1/resilience and the admin API list it before the cache.
	var res struct {
		Dependencies []struct {
			Name      string  `json:"name"`
			TimeoutMS float64 `json:"timeout_ms"`
		} `json:"dependencies"`
	}
	if st, body := get(t, api+"/v1/resilience"); st != http.StatusOK || json.Unmarshal(body, &res) != nil {
		t.Fatalf("resilience: %d %s", st, body)
	}
	var names []string
	for _, d := range res.Dependencies {
		names = append(names, d.Name)
		if d.Name == "reviews" && d.TimeoutMS != 250 {
			t.Errorf("reviews timeout_ms %v, want 250", d.TimeoutMS)
		}
	}
	if !slices.Equal(names, []string{"order", "inventory", "coupon", "logistics", "reviews", "cache"}) {
		t.Errorf("/v1/resilience names %v", names)
	}
	if st, body := do(t, http.MethodPatch, admin+"/admin/dependencies/reviews", `{"cache_max_age":"20m"}`, token); st != http.StatusOK || !strings.Contains(string(body), `"20m"`) {
		t.Errorf("PATCH reviews: %d %s", st, body)
	}

	// The reviews service fails: a page seen before gets its last-good copy
	// (written after the answer, so wait for it), a new one the default.
	if st, body := do(t, http.MethodPut, sim+"/faults/reviews", `{"error_rate":1}`, ""); st != http.StatusOK {
		t.Fatalf("fault: %d %s", st, body)
	}
	var cached section
	for deadline := time.Now().Add(10 * time.Second); ; {
		page = order(t, api, "o-1001")
		if cached = page.section(t, "reviews"); cached.Source == "cache" || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the write-behind has not landed yet
	}
	if cached.Source != "cache" || cached.Reason != "FAILURE" || cached.AsOf == "" || !page.Degraded || !slices.Equal(cached.Items, live.Items) {
		t.Fatalf("reviews while failing, seen before: %+v", cached)
	}
	fresh := order(t, api, "o-4242")
	fb := fresh.raw["reviews"]
	if want := `{"source":"fallback","degraded":true,"reason":"FAILURE","items":[],"average":null}`; string(fb) != want {
		t.Fatalf("reviews while failing, never seen:\n got %s\nwant %s", fb, want)
	}
	for _, name := range []string{"order", "inventory", "coupons", "logistics"} {
		if s := fresh.section(t, name); s.Source != "live" {
			t.Errorf("%s is %s while only reviews fails", name, s.Source)
		}
	}
}

type section struct {
	Source   string           `json:"source"`
	Degraded bool             `json:"degraded"`
	Reason   string           `json:"reason"`
	AsOf     string           `json:"as_of"`
	Items    []reviews.Review `json:"items"`
	Average  *float64         `json:"average"`
}

type pageJSON struct {
	Degraded bool
	raw      map[string]json.RawMessage
}

func (p pageJSON) section(t *testing.T, name string) section {
	t.Helper()
	var s section
	if err := json.Unmarshal(p.raw[name], &s); err != nil {
		t.Fatalf("section %s: %s: %v", name, p.raw[name], err)
	}
	return s
}

func order(t *testing.T, api, id string) pageJSON {
	t.Helper()
	st, body := get(t, api+"/v1/orders/"+id)
	var p pageJSON
	if st != http.StatusOK || json.Unmarshal(body, &p.raw) != nil || json.Unmarshal(p.raw["degraded"], &p.Degraded) != nil {
		t.Fatalf("GET %s: %d %s", id, st, body)
	}
	return p
}

// sameAverage: the page's average is the one the simulator sent (rounded to
// one decimal), or null for both when there are no reviews.
func sameAverage(got, sim *float64) bool {
	if got == nil || sim == nil {
		return got == nil && sim == nil
	}
	return *got == *sim
}

func get(t *testing.T, url string) (int, []byte) { return do(t, http.MethodGet, url, "", "") }

func do(t *testing.T, method, url, body, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// serve runs app.Serve until the test ends and returns its addresses.
func serve(t *testing.T, cfg config.Serve) app.Addrs {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan app.Addrs, 1)
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() {
		done <- app.Serve(ctx, cfg, app.Env{Stderr: logs, Reload: make(chan struct{}), OnReady: func(a app.Addrs) { ready <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v\n%s", err, logs)
		}
		http.DefaultClient.CloseIdleConnections()
	})
	select {
	case a := <-ready:
		return a
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("Serve ended before ready: %v\n%s", err, logs)
		return app.Addrs{}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
