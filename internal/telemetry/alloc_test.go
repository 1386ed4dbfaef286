package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/orderagg/orderagg/internal/resilience"
)

// TestMiddlewareAllocations: with traces off, the middleware costs a traced
// route nothing when the caller sent no trace context.
func TestMiddlewareAllocations(t *testing.T) {
	clearOTelEnv(t)
	tel, err := Setup(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	e := echo.New()
	c := e.NewContext(httptest.NewRequest(http.MethodGet, "/v1/orders/o-1", nil), httptest.NewRecorder())
	c.SetPath("/v1/orders/:id")
	h := tel.Middleware()(func(echo.Context) error { return nil })
	if n := testing.AllocsPerRun(1000, func() { _ = h(c) }); n != 0 {
		t.Errorf("the middleware allocates %v times per request with traces off", n)
	}
}

func BenchmarkOnEvent(b *testing.B) {
	for _, exporter := range []string{"none", "test"} {
		b.Run("traces="+exporter, func(b *testing.B) {
			clearOTelEnv(b)
			cfg := Config{}
			if exporter == "test" {
				cfg.SpanExporter = discardExporter{}
			}
			tel, err := Setup(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
			l := tel.Listener(nil)
			e := resilience.Event{Dependency: "inventory", Kind: resilience.KindSuccess, Attempt: 1, Start: time.Now(), Duration: 3 * time.Millisecond}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					l.OnEvent(ctx, e)
				}
			})
		})
	}
}
