package resilience

import (
	"context"
	"testing"
)

func nothing(context.Context) (int, error) { return 1, nil }

func BenchmarkDo(b *testing.B) {
	g, err := New("bench", Config{Bulkhead: BulkheadConfig{MaxConcurrent: 1 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.Run("sequential", func(b *testing.B) {
		for b.Loop() {
			if _, err := Do(ctx, g, nothing); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := Do(ctx, g, nothing); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkDoAutoTimeout is the common path with an adaptive sub-budget:
// one more atomic load for the budget and one for the once-a-second look.
func BenchmarkDoAutoTimeout(b *testing.B) {
	g, err := New("bench", Config{AutoTimeout: true, Bulkhead: BulkheadConfig{MaxConcurrent: 1 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Do(ctx, g, nothing); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWithTimeoutAlone(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, cancel := context.WithTimeout(ctx, 1e9)
		_ = c
		cancel()
	}
}
