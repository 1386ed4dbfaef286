package reviews_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orderagg/orderagg/examples/reviews"
	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reviewsService is a fake reviews service whose behaviour a test switches.
type reviewsService struct {
	mode atomic.Value // "ok", "fail", "hang", "garbage", "404"
	srv  *httptest.Server
}

func newReviewsService(t *testing.T) *reviewsService {
	rs := &reviewsService{}
	rs.mode.Store("ok")
	rs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/reviews/v1/orders/")
		id, ok2 := strings.CutSuffix(id, "/reviews")
		if !ok || !ok2 {
			http.NotFound(w, r)
			return
		}
		switch rs.mode.Load() {
		case "fail":
			http.Error(w, `{"error":{"code":"INTERNAL","message":"boom"}}`, http.StatusInternalServerError)
			return
		case "hang":
			<-r.Context().Done() // until the client gives up
			return
		case "404":
			http.NotFound(w, r)
			return
		case "garbage":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"order_id":%q,"reviews":[{"sku":"SKU-1","rating":9,"at":"2026-01-02T03:04:05Z"}]}`, id)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"order_id":%q,"reviews":[`+
			`{"sku":"SKU-1","author":"Ana","rating":5,"text":"Warm and soft.","at":"2026-01-02T03:04:05Z"},`+
			`{"sku":"SKU-2","author":"Ben","rating":4,"text":"Good mug.","at":"2026-01-03T03:04:05Z"}]}`, id)
	}))
	t.Cleanup(rs.srv.Close)
	return rs
}

// memStore is an in-memory last-good store (the real one is Redis).
type memStore struct {
	mu sync.Mutex
	m  map[string]orderdetail.CacheEntry
}

func (s *memStore) Get(_ context.Context, dep, id string) (orderdetail.CacheEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[dep+"/"+id]
	if !ok {
		return orderdetail.CacheEntry{}, orderdetail.ErrCacheMiss
	}
	return e, nil
}

func (s *memStore) Put(dep, id string, e orderdetail.CacheEntry, _ time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[dep+"/"+id]; !ok || e.AsOf.After(old.AsOf) {
		s.m[dep+"/"+id] = e
	}
}

type orderFunc func(ctx context.Context, id string) (orderdetail.Order, error)

func (f orderFunc) GetOrder(ctx context.Context, id string) (orderdetail.Order, error) {
	return f(ctx, id)
}

func guard(t *testing.T, name string, cfg resilience.Config) *resilience.Guard {
	t.Helper()
	g, err := resilience.New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// page builds the aggregation as internal/app/serve.go does — the core, and
// the reviews section registered next to it with one NewSection call — puts
// the public HTTP API in front of it, and returns a function that fetches
// one page's JSON.
func page(t *testing.T, c reviews.Client) func(id string) (int, http.Header, map[string]json.RawMessage) {
	t.Helper()
	settings := reviews.DefaultSettings()
	settings.Timeout = 100 * time.Millisecond // keep the hang test quick
	order := orderFunc(func(_ context.Context, id string) (orderdetail.Order, error) {
		return orderdetail.Order{ID: id, Status: "PAID", Currency: "EUR", Items: []orderdetail.OrderItem{{SKU: "SKU-1", Quantity: 1}, {SKU: "SKU-2", Quantity: 2}}}, nil
	})
	core := orderdetail.NewCore(guard(t, "order", resilience.Config{Timeout: time.Second}), time.Hour, order)

	// The registration: one line in serve.go's sections.
	section := reviews.NewSection(guard(t, reviews.Name, settings.Config), settings.CacheMaxAge, c)

	agg, err := orderdetail.New(orderdetail.Config{
		Core:       core,
		Sections:   []orderdetail.Dependency{section},
		Store:      &memStore{m: map[string]orderdetail.CacheEntry{}},
		CacheGuard: guard(t, "cache", resilience.Config{Timeout: 50 * time.Millisecond}),
		Reserve:    50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	api := handlers.New(handlers.Options{Pager: agg, Deadline: 1500 * time.Millisecond, MaxInflight: 8, Logger: slog.New(slog.DiscardHandler)})
	return func(id string) (int, http.Header, map[string]json.RawMessage) {
		t.Helper()
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/orders/"+id, nil))
		var body map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("invalid JSON %q: %v", rec.Body.String(), err)
		}
		return rec.Code, rec.Header(), body
	}
}

type sectionJSON struct {
	Source   string           `json:"source"`
	Degraded bool             `json:"degraded"`
	Reason   string           `json:"reason"`
	AsOf     string           `json:"as_of"`
	Items    []reviews.Review `json:"items"`
	Average  *float64         `json:"average"`
}

func reviewsOf(t *testing.T, body map[string]json.RawMessage) (sectionJSON, string) {
	t.Helper()
	raw, ok := body[reviews.Name]
	if !ok {
		t.Fatalf("the page has no %q section: %v", reviews.Name, body)
	}
	var s sectionJSON
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s, string(raw)
}

func TestPageGainsALiveReviewsSection(t *testing.T) {
	rs := newReviewsService(t)
	get := page(t, &reviews.HTTPClient{BaseURL: rs.srv.URL})
	status, header, body := get("o-1")
	if status != http.StatusOK || string(body["degraded"]) != "false" || header.Get("Cache-Control") != "" {
		t.Fatalf("%d degraded=%s cache-control=%q", status, body["degraded"], header.Get("Cache-Control"))
	}
	s, raw := reviewsOf(t, body)
	if s.Source != "live" || s.Degraded || s.Reason != "" || len(s.Items) != 2 || s.Average == nil || *s.Average != 4.5 {
		t.Fatalf("reviews section %s", raw)
	}
	if s.Items[0].Author != "Ana" || s.Items[1].Rating != 4 {
		t.Fatalf("items %+v", s.Items)
	}
}

func TestPageFallsBackToUnknownReviews(t *testing.T) {
	for mode, reason := range map[string]string{"fail": "FAILURE", "hang": "TIMEOUT", "garbage": "FAILURE", "404": "FAILURE"} {
		t.Run(mode, func(t *testing.T) {
			rs := newReviewsService(t)
			rs.mode.Store(mode)
			get := page(t, &reviews.HTTPClient{BaseURL: rs.srv.URL})
			start := time.Now()
			status, header, body := get("o-2") // never answered live: no last-good copy
			if took := time.Since(start); took > time.Second {
				t.Fatalf("page took %v", took)
			}
			if status != http.StatusOK || string(body["degraded"]) != "true" || header.Get("Cache-Control") != "no-store" {
				t.Fatalf("%d degraded=%s cache-control=%q", status, body["degraded"], header.Get("Cache-Control"))
			}
			_, raw := reviewsOf(t, body)
			// The semantic default, exactly: no reviews listed, average unknown.
			want := `{"source":"fallback","degraded":true,"reason":"` + reason + `","items":[],"average":null}`
			if raw != want {
				t.Fatalf("reviews section\n got %s\nwant %s", raw, want)
			}
			var order struct {
				Source string `json:"source"`
			}
			if err := json.Unmarshal(body["order"], &order); err != nil || order.Source != "live" {
				t.Fatalf("a reviews failure touched the order: %s", body["order"])
			}
		})
	}
}

func TestPageServesLastGoodReviews(t *testing.T) {
	rs := newReviewsService(t)
	get := page(t, &reviews.HTTPClient{BaseURL: rs.srv.URL})
	if _, _, body := get("o-3"); string(body["degraded"]) != "false" {
		t.Fatalf("warm-up degraded: %s", body["degraded"])
	}
	rs.mode.Store("fail")
	_, _, body := get("o-3")
	s, raw := reviewsOf(t, body)
	if s.Source != "cache" || !s.Degraded || s.Reason != "FAILURE" || s.AsOf == "" || len(s.Items) != 2 || s.Average == nil || *s.Average != 4.5 {
		t.Fatalf("reviews section %s", raw)
	}
	if asOf, err := time.Parse(time.RFC3339Nano, s.AsOf); err != nil || time.Since(asOf) > time.Minute {
		t.Fatalf("as_of %q: %v", s.AsOf, err)
	}
}

func TestFakeClient(t *testing.T) {
	calls := 0
	get := page(t, reviews.ClientFunc(func(context.Context, string) (reviews.Reviews, error) {
		calls++
		return reviews.Reviews{}, errors.New("down")
	}))
	_, _, body := get("o-4")
	if s, raw := reviewsOf(t, body); s.Source != "fallback" || s.Average != nil || s.Items == nil || len(s.Items) != 0 {
		t.Fatalf("reviews section %s", raw)
	}
	if calls != 2 { // one retry, the default for a failure
		t.Fatalf("%d calls, want 2", calls)
	}
}

func TestHTTPClientClassifiesErrors(t *testing.T) {
	rs := newReviewsService(t)
	c := &reviews.HTTPClient{BaseURL: rs.srv.URL}
	ctx := context.Background()

	rs.mode.Store("404")
	_, err := c.GetReviews(ctx, "o-5")
	if !errors.Is(err, orderdetail.ErrNotFound) || resilience.KindOf(err) != resilience.KindBadRequest {
		t.Errorf("404: %v (kind %v): want not found, the caller's fault", err, resilience.KindOf(err))
	}
	rs.mode.Store("fail")
	if _, err := c.GetReviews(ctx, "o-5"); resilience.KindOf(err) != resilience.KindFailure {
		t.Errorf("500: %v (kind %v): want a failure", err, resilience.KindOf(err))
	}
	rs.mode.Store("garbage")
	if _, err := c.GetReviews(ctx, "o-5"); !errors.Is(err, reviews.ErrMalformed) || resilience.KindOf(err) != resilience.KindFailure {
		t.Errorf("bad rating: %v: want malformed, a failure", err)
	}
	rs.mode.Store("hang")
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := c.GetReviews(tctx, "o-5"); resilience.KindOf(err) != resilience.KindDeadline {
		t.Errorf("hang: %v (kind %v): want the caller's deadline", err, resilience.KindOf(err))
	}
	// A body for another order is not an answer for this one.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"order_id":"o-other","reviews":[]}`)
	}))
	defer other.Close()
	if _, err := (&reviews.HTTPClient{BaseURL: other.URL}).GetReviews(ctx, "o-5"); !errors.Is(err, reviews.ErrMalformed) {
		t.Errorf("wrong order: %v", err)
	}
}

func TestDefaultSettings(t *testing.T) {
	d := reviews.DefaultSettings()
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	// The rules config.Dependencies.Validate applies to every downstream.
	if d.Timeout >= 1500*time.Millisecond || d.CacheMaxAge <= 0 {
		t.Fatalf("timeout %v, cache_max_age %v", d.Timeout, d.CacheMaxAge)
	}
	// The guard accepts them, and the admin API shows them keyed like the
	// --config file.
	guard(t, reviews.Name, d.Config)
	if s := d.Settings(); s["timeout"] != "250ms" || s["cache_max_age"] != "10m" {
		t.Fatalf("settings %v", s)
	}
}
