package app

import (
	"net/http"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestCacheWritesLinkToTheirRequest: in the running service, the
// write-behind that stores a page's live sections is traced as "cache write"
// spans of their own, each linked to the server span of the request whose
// answers it stores.
func TestCacheWritesLinkToTheirRequest(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	rd := miniredis.RunT(t) // the in-memory store has no Redis commands to trace
	s, _ := startServiceEnv(t, []string{"--redis-url", "redis://" + rd.Addr()}, nil, func(e *Env) { e.SpanExporter = exp })
	if a := s.get("/v1/orders/o-8"); a.status != http.StatusOK || a.body["degraded"] != false {
		t.Fatalf("page: %d %v", a.status, a.body)
	}

	// The four live sections are written after the answer, each in a span
	// of its own: wait for all four.
	var server trace.SpanContext
	var writes []tracetest.SpanStub
	waitUntil(t, func() bool {
		server, writes = trace.SpanContext{}, nil
		for _, sp := range exp.GetSpans() {
			switch {
			case sp.SpanKind == trace.SpanKindServer && sp.Name == "GET /v1/orders/:id":
				server = sp.SpanContext
			case sp.Name == "cache write":
				writes = append(writes, sp)
			}
		}
		return server.IsValid() && len(writes) >= 4
	})
	for _, w := range writes {
		if w.Parent.IsValid() || w.SpanContext.TraceID() == server.TraceID() {
			t.Errorf("a cache write span is in the request's trace; it should be a root of its own, linked to it")
		}
		if len(w.Links) != 1 {
			t.Errorf("a cache write span with %d links, want one: the page's request", len(w.Links))
		}
		for _, l := range w.Links {
			if l.SpanContext.SpanID() != server.SpanID() || l.SpanContext.TraceID() != server.TraceID() {
				t.Errorf("cache write linked to %s/%s, want the request's server span %s/%s",
					l.SpanContext.TraceID(), l.SpanContext.SpanID(), server.TraceID(), server.SpanID())
			}
		}
	}
}
