package telemetry

import (
	"context"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/resilience"
)

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
			l := tel.Listener()
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
