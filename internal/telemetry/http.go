package telemetry

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// untracedPaths get no server span: probes and scrapes arrive every few
// seconds from machines, and their spans would bury the requests of people.
// The dashboard is left out too: its event stream is one request that lasts
// as long as the browser tab.
var untracedPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

func traced(path string) bool {
	return !untracedPaths[path] && path != "/dashboard" && !strings.HasPrefix(path, "/dashboard/")
}

// Middleware starts the server span of each request: the W3C traceparent and
// baggage of the caller are extracted, so orderagg's spans join the caller's
// trace, and the span is named by method and route template
// ("GET /v1/orders/{id}"), never by the raw path, so the names stay few.
// The request's context carries the span, so the guards' dependency spans,
// the client spans of WrapTransport and the log lines of LogHandler hang
// under it. /healthz, /readyz, /metrics and /dashboard are not traced.
//
// Register it with e.Use, first: it must run after routing (for the route
// template) and outside every other middleware. It hands a handler's error to
// echo's HTTPErrorHandler itself, so the span sees the status actually sent,
// and then returns nil so the error is not handled twice.
func (t *Telemetry) Middleware() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if !traced(req.URL.Path) {
				return next(c)
			}
			if !t.tracing {
				// No spans to record: only hand a caller's trace context on
				// to the downstream calls, and pay nothing when there is none.
				if t.carriesContext(req.Header) {
					c.SetRequest(req.WithContext(t.prop.Extract(req.Context(), propagation.HeaderCarrier(req.Header))))
				}
				return next(c)
			}
			ctx := t.prop.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
			route := routeTemplate(c.Path())
			name := req.Method
			if route != "" {
				name += " " + route
			}
			attrs := []attribute.KeyValue{
				semconv.HTTPRequestMethodKey.String(req.Method),
				semconv.URLPath(req.URL.Path),
				semconv.URLScheme(c.Scheme()),
				semconv.ClientAddress(c.RealIP()),
			}
			if route != "" {
				attrs = append(attrs, semconv.HTTPRoute(route))
			}
			if ua := req.UserAgent(); ua != "" {
				attrs = append(attrs, semconv.UserAgentOriginal(ua))
			}
			ctx, span := t.tracer.Start(ctx, name,
				trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			defer span.End()
			ctx, rt := t.newReqTrace(ctx)
			defer rt.end() // before the server span ends: children first
			c.SetRequest(req.WithContext(ctx))

			if err := next(c); err != nil {
				span.RecordError(err)
				c.Error(err)
			}
			res := c.Response()
			span.SetAttributes(semconv.HTTPResponseStatusCode(res.Status))
			if id := res.Header().Get(echo.HeaderXRequestID); id != "" {
				span.SetAttributes(attrSpanRequestID.String(id))
			}
			if res.Status >= 500 {
				// Server semantics: a 4xx is the client's doing, a 5xx ours.
				span.SetStatus(codes.Error, http.StatusText(res.Status))
			}
			return nil
		}
	}
}

// carriesContext reports whether h has any header the propagator reads
// (traceparent, tracestate, baggage).
func (t *Telemetry) carriesContext(h http.Header) bool {
	for _, f := range t.propFields {
		if len(h[f]) > 0 && h[f][0] != "" {
			return true
		}
	}
	return false
}

// routeTemplate turns echo's "/v1/orders/:id" into "/v1/orders/{id}", the
// spelling of the contract and of OpenAPI.
func routeTemplate(p string) string {
	if !strings.Contains(p, ":") {
		return p
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.Join(segs, "/")
}

// WrapTransport fits downstream.Config.WrapTransport: every physical attempt
// to dep becomes a client span ("<dep> GET") and carries W3C traceparent and
// baggage headers so the downstream can join the trace. Within a traced
// request the client span sits under an "attempt <dep>" span, itself under
// the call's "dependency <dep>" span (see reqTrace); elsewhere it is a child
// of the span in the request's context. With traces off the caller's own trace
// context, if it sent one, is still passed on. otelhttp's own HTTP metrics
// are turned off: orderagg_dependency_attempt_duration_seconds already
// measures each attempt, by outcome.
func (t *Telemetry) WrapTransport(dep string, next http.RoundTripper) http.RoundTripper {
	if !t.tracing {
		// No spans to make: otelhttp would still build attribute sets and
		// wrap every body (~30 µs a call here) only to drop them.
		return propagateOnly{next: next, prop: t.prop}
	}
	return attemptTransport{dep: dep, next: otelhttp.NewTransport(next,
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithPropagators(t.prop),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return dep + " " + r.Method }),
		otelhttp.WithSpanOptions(trace.WithAttributes(attrSpanDependency.String(dep))),
	)}
}

// attemptTransport starts the attempt span around each round trip of a
// traced request.
type attemptTransport struct {
	dep  string
	next http.RoundTripper
}

func (a attemptTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if rt := reqTraceFrom(r.Context()); rt != nil {
		r = r.WithContext(rt.startAttempt(r.Context(), a.dep))
	}
	return a.next.RoundTrip(r)
}

// propagateOnly passes a caller's trace context on to the downstream when
// traces are off here: the request is copied (a RoundTripper must not change
// it) only when there is something to inject.
type propagateOnly struct {
	next http.RoundTripper
	prop propagation.TextMapPropagator
}

func (p propagateOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() && baggage.FromContext(ctx).Len() == 0 {
		return p.next.RoundTrip(r)
	}
	r = r.Clone(ctx)
	p.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
	return p.next.RoundTrip(r)
}
