package reviews_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/app"
	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/sim"
)

// TestServeWithReviewsRegistered runs the whole service in process with
// reviews registered by importing this package, and nothing else changed:
// --reviews-url exists, the page gains a live reviews section, a failing
// reviews service degrades that section alone, and /v1/resilience and
// /admin/dependencies list reviews.
func TestServeWithReviewsRegistered(t *testing.T) {
	rs := newReviewsService(t)
	simSrv := httptest.NewServer(sim.New())
	t.Cleanup(simSrv.Close)
	const token = "0123456789abcdef"
	cfg, err := config.ParseServeArgs([]string{"--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--admin-token", token,
		"--downstreams-url", simSrv.URL, "--reviews-url", rs.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan app.Addrs, 1), make(chan error, 1)
	go func() {
		done <- app.Serve(ctx, cfg, app.Env{Stderr: io.Discard, OnReady: func(a app.Addrs) { ready <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		http.DefaultClient.CloseIdleConnections()
	})
	var addrs app.Addrs
	select {
	case addrs = <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("Serve: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not ready within 30s")
	}
	get := func(url string, auth bool) map[string]json.RawMessage {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
		}
		return body
	}
	section := func(body map[string]json.RawMessage, name string) sectionJSON {
		t.Helper()
		var s sectionJSON
		if err := json.Unmarshal(body[name], &s); err != nil {
			t.Fatalf("section %s: %s: %v", name, body[name], err)
		}
		return s
	}

	page := get("http://"+addrs.API+"/v1/orders/o-1", false)
	if s := section(page, "reviews"); s.Source != "live" || len(s.Items) != 2 || s.Average == nil || *s.Average != 4.5 {
		t.Fatalf("reviews section %s", page["reviews"])
	}
	rs.mode.Store("fail")
	page = get("http://"+addrs.API+"/v1/orders/o-2", false)
	if s := section(page, "reviews"); s.Source != "fallback" || s.Reason != "FAILURE" || s.Items == nil || s.Average != nil {
		t.Fatalf("failing reviews: section %s", page["reviews"])
	}
	for _, name := range []string{"order", "inventory", "coupons", "logistics"} {
		if s := section(page, name); s.Source != "live" {
			t.Errorf("a reviews failure touched %s: %s", name, page[name])
		}
	}

	var res struct{ Dependencies []struct{ Name string } }
	if err := json.Unmarshal(mustJSON(t, get("http://"+addrs.API+"/v1/resilience", false)), &res); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Dependencies, func(d struct{ Name string }) bool { return d.Name == "reviews" }) {
		t.Errorf("/v1/resilience lists %v, no reviews", res.Dependencies)
	}
	var admin struct{ Dependencies map[string]map[string]any }
	if err := json.Unmarshal(mustJSON(t, get("http://"+addrs.Admin+"/admin/dependencies", true)), &admin); err != nil {
		t.Fatal(err)
	}
	if got := admin.Dependencies["reviews"]["cache_max_age"]; got != "10m" {
		t.Errorf("/admin/dependencies: reviews' cache_max_age %v, want the entry's 10m", got)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
