package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/orderagg/orderagg/internal/cache"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// TestCacheSpans: in a traced request, a last-good read sits under the
// fallback it serves (fallback → dependency cache → the Redis
// command); the write-behind that stores the request's answer later is
// a trace of its own, "cache write", linked to the request's span, with the
// Redis commands under it; and the NOSCRIPT answer a fresh Redis gives the
// write's EVALSHA, followed by a good EVAL, does not fail the "cache write"
// span (redisotel's EVALSHA span says NOSCRIPT, as it was).
func TestCacheSpans(t *testing.T) {
	h := newHarness(t)
	rd := miniredis.RunT(t) // a fresh server: its script cache starts empty
	store, err := cache.Open(context.Background(), cache.Config{URL: "redis://" + rd.Addr()}, nil,
		cache.WithTracerProvider(h.tel.TracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(context.Background()) })
	if err := h.tel.InstrumentRedis(store.Client()); err != nil {
		t.Fatal(err)
	}
	lis := h.tel.Listener()
	guard := func(name string) *resilience.Guard {
		g, err := resilience.New(name, resilience.Config{}, resilience.WithListener(lis), resilience.WithClock(instantClock{}),
			resilience.WithTracerProvider(h.tel.TracerProvider()))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	inventory, cacheGuard := guard("inventory"), guard("cache")

	e := echo.New()
	e.Use(h.tel.Middleware())
	e.GET("/v1/orders/:id", func(c echo.Context) error {
		ctx := c.Request().Context()
		_, err := resilience.Do(ctx, inventory, func(context.Context) (int, error) { return 0, errors.New("503") })
		_, _ = resilience.Fallback(ctx, inventory, err, func(ctx context.Context, _ error) (int, error) {
			_, err := resilience.Do(ctx, cacheGuard, func(ctx context.Context) (orderdetail.CacheEntry, error) {
				e, err := store.Get(ctx, "inventory", "o-1")
				if errors.Is(err, orderdetail.ErrCacheMiss) {
					return e, nil
				}
				return e, err
			})
			h.tel.Listener().CacheLookup(ctx, "inventory", "absent")
			return 0, errors.Join(err, errors.New("no last-good answer"))
		})
		store.PutContext(ctx, "logistics", "o-1", orderdetail.CacheEntry{AsOf: time.Now(), Payload: []byte(`{}`)}, time.Minute)
		return c.NoContent(http.StatusOK)
	})
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/orders/o-1", nil))
	if err := store.Close(context.Background()); err != nil { // after its writes settle
		t.Fatal(err)
	}
	if st := store.Stats(); st.WritesOK != 1 {
		t.Fatalf("cache stats %+v, want one write stored", st)
	}

	spans := h.spans.GetSpans()
	got := treeLines(spans)
	for _, want := range []string{
		"GET /v1/orders/:id > dependency inventory event=failure ERROR",
		"GET /v1/orders/:id > fallback inventory > dependency cache > redis.pipeline hmget pttl", // one round trip
		"GET /v1/orders/:id > fallback inventory > dependency cache event=success",
		"GET /v1/orders/:id > fallback inventory event=fallback_failure ERROR",
		"cache write > evalsha ERROR", // NOSCRIPT, as Redis said
		"cache write > eval",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no span %q in the traces:\n%s", want, strings.Join(got, "\n"))
		}
	}

	var server trace.SpanContext
	var writes int
	for _, s := range spans {
		if s.SpanKind == trace.SpanKindServer {
			server = s.SpanContext
		}
	}
	for _, s := range spans {
		if s.Name != "cache write" {
			if s.Status.Code == codes.Error && !strings.Contains(s.Name, "inventory") && !strings.Contains(s.Name, "evalsha") {
				t.Errorf("span %q failed: %v", s.Name, s.Status)
			}
			continue
		}
		writes++
		if s.Status.Code == codes.Error {
			t.Errorf("cache write span failed: %v", s.Status)
		}
		if s.Parent.IsValid() || s.SpanContext.TraceID() == server.TraceID() {
			t.Errorf("cache write span is in the request's trace; it should be a root linked to it")
		}
		if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != server.SpanID() {
			t.Errorf("cache write links %+v, want the request's server span %s", s.Links, server.SpanID())
		}
	}
	if writes != 1 {
		t.Errorf("%d cache write spans, want 1: the entry's, with its EVALSHA and the EVAL re-sent after NOSCRIPT under it", writes)
	}
}

// TestRefusedCacheReadUnderFallback: a last-good read the cache's breaker
// refused still sits under the fallback it was for, as a short-circuited
// cache call.
func TestRefusedCacheReadUnderFallback(t *testing.T) {
	h := newHarness(t)
	lis := h.tel.Listener()
	guard := func(name string) *resilience.Guard {
		g, err := resilience.New(name, resilience.Config{}, resilience.WithListener(lis), resilience.WithClock(instantClock{}),
			resilience.WithTracerProvider(h.tel.TracerProvider()))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	coupon, cacheGuard := guard("coupon"), guard("cache")
	cacheGuard.ForceBreaker(resilience.ForceOpen)

	e := echo.New()
	e.Use(h.tel.Middleware())
	e.GET("/v1/orders/:id", func(c echo.Context) error {
		ctx := c.Request().Context()
		_, err := resilience.Do(ctx, coupon, func(context.Context) (int, error) { return 0, errors.New("503") })
		_, _ = resilience.Fallback(ctx, coupon, err, func(ctx context.Context, _ error) (int, error) {
			_, err := resilience.Do(ctx, cacheGuard, func(context.Context) (int, error) {
				t.Error("the cache was called through an open breaker")
				return 0, nil
			})
			h.tel.Listener().CacheLookup(ctx, "coupon", "error")
			return 0, err
		})
		return c.NoContent(http.StatusOK)
	})
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/orders/o-1", nil))

	got := treeLines(h.spans.GetSpans())
	want := []string{
		"GET /v1/orders/:id",
		"GET /v1/orders/:id > dependency coupon event=failure ERROR",
		"GET /v1/orders/:id > fallback coupon event=fallback_failure ERROR",
		"GET /v1/orders/:id > fallback coupon > dependency cache event=short_circuited ERROR",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("trace tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
