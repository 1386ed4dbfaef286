package resilience

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// One span per call, where the call starts: a child of the caller's span,
// parent of whatever the attempts start, with the dependency, the call's
// event and one span event per attempt; a refused call's span is an error;
// a fallback has a span of its own.
func TestCallSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	clk := newFakeClock()
	clk.auto = true
	g := mustGuard(t, Config{Retry: RetryConfig{MaxAttempts: 2}}, WithClock(clk), WithTracerProvider(tp))

	ctx, request := tp.Tracer("test").Start(context.Background(), "request")
	n := 0
	Do(ctx, g, func(ctx context.Context) (string, error) {
		_, client := tp.Tracer("test").Start(ctx, "client GET")
		client.End()
		if n++; n == 1 {
			return "", errBoom
		}
		return "ok", nil
	})
	g.ForceBreaker(ForceOpen)
	_, err := Do(ctx, g, ok)
	Fallback(ctx, g, err, func(context.Context, error) (string, error) { return "", errors.New("no last-good answer") })
	request.End()

	spans := exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	reqSpan := byName["request"][0].SpanContext
	calls := byName["dependency dep"]
	if len(calls) != 2 || len(byName["fallback dep"]) != 1 || len(byName["client GET"]) != 2 {
		t.Fatalf("spans %v: want two call spans, a fallback span and the two attempts' client spans", byName)
	}
	attrs := func(kvs []attribute.KeyValue) map[attribute.Key]string {
		m := map[attribute.Key]string{}
		for _, kv := range kvs {
			m[kv.Key] = kv.Value.String()
		}
		return m
	}
	for i, want := range []struct {
		event  string
		status codes.Code
		events int
	}{{"success", codes.Unset, 2}, {"short_circuited", codes.Error, 0}} {
		s := calls[i]
		attempts := 0
		for _, e := range s.Events {
			if e.Name == "attempt" {
				attempts++
			}
		}
		if s.Parent.SpanID() != reqSpan.SpanID() {
			t.Errorf("call span %d is not a child of the request's span", i)
		}
		if a := attrs(s.Attributes); a["orderagg.dependency"] != "dep" || a["orderagg.event"] != want.event || s.Status.Code != want.status || attempts != want.events {
			t.Errorf("call span %d: %v status %v, %d attempts; want event %s, status %v, %d attempts", i, a, s.Status.Code, attempts, want.event, want.status, want.events)
		}
	}
	if a := attrs(calls[0].Events[0].Attributes); a["orderagg.attempt"] != "1" || a["orderagg.event"] != "failure" {
		t.Errorf("first attempt's span event %v", a)
	}
	for _, c := range byName["client GET"] {
		if c.Parent.SpanID() != calls[0].SpanContext.SpanID() {
			t.Errorf("an attempt's client span is not a child of the call's span")
		}
	}
	if fb := byName["fallback dep"][0]; attrs(fb.Attributes)["orderagg.event"] != "fallback_failure" || fb.Status.Code != codes.Error || fb.Parent.SpanID() != reqSpan.SpanID() {
		t.Errorf("fallback span %v status %v", attrs(fb.Attributes), fb.Status)
	}
}

// Without a tracer provider the guard leaves the caller's context as it is.
func TestNoSpansByDefault(t *testing.T) {
	ctx := context.WithValue(context.Background(), errBoom, 1)
	Do(ctx, mustGuard(t, Config{}), func(got context.Context) (string, error) {
		if got.Value(errBoom) != 1 {
			t.Error("the caller's context is lost")
		}
		return "", nil
	})
}
