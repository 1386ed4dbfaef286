package telemetry

import (
	"context"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

func newRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestInstrumentRedis: a command is a client span under the request's span,
// without its arguments, and the connection pool shows in /metrics.
func TestInstrumentRedis(t *testing.T) {
	h := newHarness(t)
	c := newRedis(t)
	if err := h.tel.InstrumentRedis(c); err != nil {
		t.Fatal(err)
	}
	ctx, parent := h.tel.TracerProvider().Tracer("test").Start(context.Background(), "request")
	if err := c.Set(ctx, "orderagg:v1:lastgood:inventory:o-1", `{"secret":"payload"}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	parent.End()

	var found bool
	for _, s := range h.spans.GetSpans() {
		if s.SpanKind != trace.SpanKindClient {
			continue
		}
		found = found || s.Name == "set"
		if s.Parent.SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("redis span %q is not a child of the request's span", s.Name)
		}
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); len(v) > 0 && strings.Contains(v, "payload") {
				t.Errorf("redis span %q carries the command's arguments: %s=%s", s.Name, kv.Key, v)
			}
		}
	}
	if !found {
		t.Fatalf("no span for SET; spans %v", names(h.spans.GetSpans()))
	}

	fams := scrape(t, h.tel)
	for _, name := range []string{"db_client_connections_usage", "db_client_connections_max", "db_client_connections_timeouts_total", "db_client_connections_waits_total"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("no %s in /metrics", name)
		}
	}
}
