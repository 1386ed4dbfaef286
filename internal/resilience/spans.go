package resilience

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// With WithTracerProvider a guard starts a span per call, "dependency
// <name>", where the call starts: a child of the span in the caller's
// context and the parent of the attempts' own (HTTP, Redis) spans; and a
// span per fallback, "fallback <name>". Each carries orderagg.dependency and
// orderagg.event (the outcome's event name), with status Error when the
// caller got no answer through the dependency's fault or the guard's
// refusal. A call's span has an "attempt" span event per attempt, with
// orderagg.attempt, orderagg.event, orderagg.hedge and orderagg.probe.
var (
	attrDependency = attribute.Key("orderagg.dependency")
	attrEvent      = attribute.Key("orderagg.event")
	noSpan         = trace.SpanFromContext(context.Background())
)

func (g *Guard) startSpan(ctx context.Context, prefix string) (context.Context, trace.Span) {
	if g.tracer == nil {
		return ctx, noSpan
	}
	return g.tracer.Start(ctx, prefix+g.name, trace.WithAttributes(attrDependency.String(g.name)))
}

func endSpan(span trace.Span, event string, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrEvent.String(event))
		switch event {
		case "failure", "timeout", "short_circuited", "rejected", "fallback_failure":
			span.RecordError(err)
			span.SetStatus(codes.Error, event)
		}
	}
	span.End()
}

func attemptEvent(span trace.Span, e Event) {
	if span.IsRecording() {
		span.AddEvent("attempt", trace.WithAttributes(attribute.Int("orderagg.attempt", e.Attempt),
			attrEvent.String(e.Name()), attribute.Bool("orderagg.hedge", e.Hedge), attribute.Bool("orderagg.probe", e.Probe)))
	}
}
