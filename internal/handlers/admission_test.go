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
	"github.com/orderagg/orderagg/internal/orderdetail"
)

// recLimiter admits up to capacity requests and records every token it
// hands out and every release, by token.
type recLimiter struct {
	capacity int
	rel      admission.ReleaseFunc

	mu       sync.Mutex
	inflight int
	issued   int64
	refused  int
	released map[int64][]admission.Outcome
}

func newRecLimiter(capacity int) *recLimiter {
	l := &recLimiter{capacity: capacity, released: map[int64][]admission.Outcome{}}
	l.rel = func(id int64, o admission.Outcome) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.inflight--
		l.released[id] = append(l.released[id], o)
	}
	return l
}

func (l *recLimiter) Acquire() (admission.Token, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight >= l.capacity {
		l.refused++
		return admission.Token{}, false
	}
	l.inflight++
	l.issued++
	return admission.NewToken(l.rel, l.issued), true
}

func (l *recLimiter) Limit() int { return l.capacity }

func (l *recLimiter) Inflight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight
}

// check asserts that every token issued was released exactly once, with
// want as its outcome, and that refused requests were refused.
func (l *recLimiter) check(t *testing.T, issued int64, refused int, want admission.Outcome) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.issued != issued || l.refused != refused {
		t.Fatalf("issued %d refused %d, want %d %d", l.issued, l.refused, issued, refused)
	}
	for id := int64(1); id <= l.issued; id++ {
		if got := l.released[id]; len(got) != 1 || got[0] != want {
			t.Fatalf("token %d released %v, want exactly once %v", id, got, want)
		}
	}
	if len(l.released) != int(l.issued) || l.inflight != 0 {
		t.Fatalf("releases for %d tokens, %d issued, %d still in flight", len(l.released), l.issued, l.inflight)
	}
}

type pagerFunc func(ctx context.Context, id string) (*orderdetail.Page, error)

func (f pagerFunc) Get(ctx context.Context, id string) (*orderdetail.Page, error) { return f(ctx, id) }

func okPage(_ context.Context, id string) (*orderdetail.Page, error) {
	return &orderdetail.Page{OrderID: id, Sections: []orderdetail.Section{
		{Name: "order", Source: orderdetail.SourceLive, BodyKey: "data", Body: orderdetail.Order{ID: id}},
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

// Every admitted request gives its slot back exactly once, whatever path it
// leaves by, with the outcome that path means; a refused one gives back
// nothing and is answered 503 OVERLOADED with Retry-After, and recorded.
func TestAdmissionReleasesExactlyOnce(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		pager  pagerFunc
		ctx    context.Context
		path   string
		status int
		want   admission.Outcome
	}{
		{"ok", okPage, context.Background(), "/v1/orders/o-1", http.StatusOK, admission.Succeeded},
		{"not found", func(context.Context, string) (*orderdetail.Page, error) { return nil, orderdetail.ErrOrderNotFound },
			context.Background(), "/v1/orders/nf-1", http.StatusNotFound, admission.Succeeded},
		{"unavailable", func(context.Context, string) (*orderdetail.Page, error) { return nil, orderdetail.ErrOrderUnavailable },
			context.Background(), "/v1/orders/o-1", http.StatusServiceUnavailable, admission.Ignored},
		{"bad id", okPage, context.Background(), "/v1/orders/a%20b", http.StatusBadRequest, admission.Ignored},
		{"panic", func(context.Context, string) (*orderdetail.Page, error) { panic("boom") },
			context.Background(), "/v1/orders/o-1", http.StatusInternalServerError, admission.Ignored},
		{"caller gone", func(ctx context.Context, _ string) (*orderdetail.Page, error) { <-ctx.Done(); return nil, ctx.Err() },
			cancelled, "/v1/orders/o-1", http.StatusServiceUnavailable, admission.Ignored},
		{"deadline missed", func(ctx context.Context, _ string) (*orderdetail.Page, error) { <-ctx.Done(); return nil, ctx.Err() },
			context.Background(), "/v1/orders/o-1", http.StatusServiceUnavailable, admission.Dropped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A missed deadline is an outcome of its own (Dropped), so only the
			// case that waits for it may reach it: the others get an hour,
			// which no stall of a loaded machine can use up.
			deadline := time.Hour
			if tc.want == admission.Dropped {
				deadline = 10 * time.Millisecond
			}
			lim := newRecLimiter(1)
			var rec recorded
			h := New(Options{Pager: tc.pager, Deadline: deadline, Limiter: lim, Record: rec.record, Logger: slog.New(slog.DiscardHandler)})
			for range 3 {
				if got := serve(t, h, tc.ctx, tc.path); got.Code != tc.status {
					t.Fatalf("status %d, want %d: %s", got.Code, tc.status, got.Body.String())
				}
			}
			lim.check(t, 3, 0, tc.want)

			// Full: refused at once, nothing released, recorded as a 503.
			lim.capacity = 0
			got := serve(t, h, tc.ctx, tc.path)
			if got.Code != http.StatusServiceUnavailable || errCode(t, got) != CodeOverloaded || got.Header().Get("Retry-After") != "1" {
				t.Fatalf("refused request got %d %q Retry-After %q", got.Code, got.Body.String(), got.Header().Get("Retry-After"))
			}
			lim.check(t, 3, 1, tc.want)
			if n := len(rec.statuses); n != 4 || rec.statuses[3] != http.StatusServiceUnavailable {
				t.Fatalf("recorded %v, want 4 answers ending with 503", rec.statuses)
			}
		})
	}
}

// With no Limiter, MaxInflight is today's fixed cap.
func TestDefaultLimiterIsFixedMaxInflight(t *testing.T) {
	entered, proceed := make(chan struct{}), make(chan struct{})
	pager := pagerFunc(func(ctx context.Context, id string) (*orderdetail.Page, error) {
		if id == "slow" {
			close(entered)
			<-proceed
		}
		return okPage(ctx, id)
	})
	h := New(Options{Pager: pager, Deadline: 5 * time.Second, MaxInflight: 1, Logger: slog.New(slog.DiscardHandler)})
	done := make(chan int)
	go func() { done <- serve(t, h, context.Background(), "/v1/orders/slow").Code }()
	<-entered
	got := serve(t, h, context.Background(), "/v1/orders/o-2")
	if got.Code != http.StatusServiceUnavailable || errCode(t, got) != CodeOverloaded || got.Header().Get("Retry-After") != "1" {
		t.Fatalf("second request with MaxInflight 1 got %d %s", got.Code, got.Body.String())
	}
	close(proceed)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("first request got %d", code)
	}
	if got := serve(t, h, context.Background(), "/v1/orders/o-3"); got.Code != http.StatusOK {
		t.Fatalf("after the first finished: %d %s", got.Code, got.Body.String())
	}
}

// An adaptive limiter plugs in the same way.
func TestAdaptiveLimiterWired(t *testing.T) {
	lim, err := admission.Adaptive(admission.AdaptiveConfig{Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	// An hour: a missed deadline would teach the limiter overload and shrink
	// it, and no stall of a loaded machine reaches an hour.
	h := New(Options{Pager: pagerFunc(okPage), Deadline: time.Hour, Limiter: lim, Logger: slog.New(slog.DiscardHandler)})
	for range 5 {
		if got := serve(t, h, context.Background(), "/v1/orders/o-1"); got.Code != http.StatusOK {
			t.Fatalf("got %d %s", got.Code, got.Body.String())
		}
	}
	if lim.Inflight() != 0 || lim.Limit() != 2 {
		t.Fatalf("inflight %d limit %d, want 0 2", lim.Inflight(), lim.Limit())
	}
}
