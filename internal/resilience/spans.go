package resilience

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The guard's spans (WithTracerProvider) carry orderagg.dependency; a
// call's or fallback's span also orderagg.event, its outcome's event name,
// and the status Error when the caller got no answer through the
// dependency's fault or the guard's refusal (failure, timeout,
// short_circuited, rejected, fallback_failure). A call's span has one
// "attempt" span event per attempt, with its number, event, and whether it
// was a hedge or a probe.
const (
	attrDependency = attribute.Key("orderagg.dependency")
	attrEvent      = attribute.Key("orderagg.event")
	attrAttempt    = attribute.Key("orderagg.attempt")
	attrHedge      = attribute.Key("orderagg.hedge")
	attrProbe      = attribute.Key("orderagg.probe")
)

var noSpan = trace.SpanFromContext(context.Background())

func (g *Guard) startSpan(ctx context.Context, prefix string) (context.Context, trace.Span) {
	if g.tracer == nil {
		return ctx, noSpan
	}
	return g.tracer.Start(ctx, prefix+g.name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrDependency.String(g.name)))
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

func attemptEvent(span trace.Span, o outcome, probe bool) {
	if span.IsRecording() {
		span.AddEvent("attempt", trace.WithAttributes(attrAttempt.Int(o.n), attrEvent.String(o.kind.String()),
			attrHedge.Bool(o.hedge), attrProbe.Bool(probe)))
	}
}
