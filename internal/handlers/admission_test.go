package handlers

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/admission"
	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/orderdetail"
)

type pagerFunc func(ctx context.Context, id string) (*orderdetail.Page, error)

func (f pagerFunc) Get(ctx context.Context, id string) (*orderdetail.Page, error) { return f(ctx, id) }

func okPage(_ context.Context, id string) (*orderdetail.Page, error) {
	return &orderdetail.Page{OrderID: id, Sections: []orderdetail.Section{
		{Name: "order", Source: orderdetail.SourceLive, BodyKey: "data", Body: downstream.Order{ID: id}},
	}}, nil
}

type recorded struct {
	mu       sync.Mutex
	statuses []int
}

func (r *recorded) record(_ context.Context, status int, _ bool, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statuses = append(r.statuses, status)
}

func serve(t *testing.T, h http.Handler, ctx context.Context, path string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func errCode(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var body ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("error body %q: %v", rec.Body.String(), err)
	}
	return body.Error.Code
}

// Every admitted request gives its slot back, whatever path it leaves by;
// a refused one is answered 503 OVERLOADED with Retry-After, and recorded.
func TestAdmissionReleasesOnEveryPath(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		pager  pagerFunc
		ctx    context.Context
		path   string
		status int
	}{
		{"ok", okPage, context.Background(), "/v1/orders/o-1", http.StatusOK},
		{"not found", func(context.Context, string) (*orderdetail.Page, error) { return nil, orderdetail.ErrOrderNotFound },
			context.Background(), "/v1/orders/nf-1", http.StatusNotFound},
		{"unavailable", func(context.Context, string) (*orderdetail.Page, error) { return nil, orderdetail.ErrOrderUnavailable },
			context.Background(), "/v1/orders/o-1", http.StatusServiceUnavailable},
		{"bad id", okPage, context.Background(), "/v1/orders/a%20b", http.StatusBadRequest},
		{"panic", func(context.Context, string) (*orderdetail.Page, error) { panic("boom") },
			context.Background(), "/v1/orders/o-1", http.StatusInternalServerError},
		{"caller gone", func(ctx context.Context, _ string) (*orderdetail.Page, error) { <-ctx.Done(); return nil, ctx.Err() },
			cancelled, "/v1/orders/o-1", http.StatusServiceUnavailable},
		{"deadline missed", func(ctx context.Context, _ string) (*orderdetail.Page, error) { <-ctx.Done(); return nil, ctx.Err() },
			context.Background(), "/v1/orders/o-1", http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deadline := time.Hour
			if tc.name == "deadline missed" {
				deadline = time.Millisecond
			}
			lim := admission.New(1)
			var rec recorded
			h := New(Options{Pager: tc.pager, Deadline: deadline, Limiter: lim, Record: rec.record, Logger: slog.New(slog.DiscardHandler)})
			for range 3 {
				if got := serve(t, h, tc.ctx, tc.path); got.Code != tc.status {
					t.Fatalf("status %d, want %d: %s", got.Code, tc.status, got.Body.String())
				}
				if n := lim.Inflight(); n != 0 {
					t.Fatalf("%d slots still held after the answer", n)
				}
			}

			// Full: refused at once and recorded as a 503.
			if !lim.TryAcquire() {
				t.Fatal("the only slot is held")
			}
			defer lim.Release()
			got := serve(t, h, tc.ctx, tc.path)
			if got.Code != http.StatusServiceUnavailable || errCode(t, got) != CodeOverloaded || got.Header().Get("Retry-After") != "1" {
				t.Fatalf("refused request got %d %q Retry-After %q", got.Code, got.Body.String(), got.Header().Get("Retry-After"))
			}
			if n := len(rec.statuses); n != 4 || rec.statuses[3] != http.StatusServiceUnavailable {
				t.Fatalf("recorded %v, want 4 answers ending with 503", rec.statuses)
			}
		})
	}
}
