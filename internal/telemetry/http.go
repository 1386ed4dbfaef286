package telemetry

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// traced reports whether a request gets a server span: probes, scrapes and
// the dashboard (whose event stream lasts as long as a browser tab) do not.
func traced(r *http.Request) bool {
	switch p := r.URL.Path; {
	case p == "/healthz", p == "/readyz", p == "/metrics", p == "/dashboard", strings.HasPrefix(p, "/dashboard/"):
		return false
	}
	return true
}

// Middleware starts each traced request's server span with otelhttp,
// continuing the caller's W3C trace, and names it by method and route
// template ("GET /v1/orders/{id}"; an unrouted request's is the method
// alone, so scanners cannot mint names). client.address is the peer's,
// unless the peer is a trusted proxy (Config.TrustedProxies); of the
// caller's baggage only the keys of Config.ForwardBaggage stay in the
// request's context, and so reach the downstreams. The span records the
// status actually sent: a handler's error goes to echo's HTTPErrorHandler
// here, and the middleware returns nil.
//
// Register it with e.Use, so that it runs after routing.
func (t *Telemetry) Middleware() echo.MiddlewareFunc {
	wrap := otelhttp.NewMiddleware("",
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithPropagators(allowBaggage(t.cfg.ForwardBaggage)),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()), // orderagg_http_* measure the page
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }),
	)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !traced(c.Request()) {
				return next(c)
			}
			res := c.Response()
			w := res.Writer
			defer func() { res.Writer = w }()
			wrap(http.HandlerFunc(func(sw http.ResponseWriter, r *http.Request) {
				res.Writer = sw // the status reaches otelhttp's span
				c.SetRequest(r)
				span := trace.SpanFromContext(r.Context())
				if route := routeTemplate(c.Path()); route != "" {
					span.SetName(r.Method + " " + route)
					span.SetAttributes(semconv.HTTPRoute(route))
				}
				span.SetAttributes(semconv.ClientAddress(t.clientIP(r)))
				if err := next(c); err != nil {
					span.RecordError(err)
					c.Error(err)
				}
				if id := res.Header().Get(echo.HeaderXRequestID); id != "" {
					span.SetAttributes(attrSpanRequestID.String(id))
				}
			})).ServeHTTP(w, c.Request())
			return nil
		}
	}
}

// routeTemplate turns echo's "/v1/orders/:id" into "/v1/orders/{id}", the
// spelling of the contract and of OpenAPI.
func routeTemplate(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.Join(segs, "/")
}

// allowBaggage extracts the W3C traceparent and tracestate and, of the
// caller's baggage, the members whose keys are listed; it injects both.
type allowBaggage []string

func (a allowBaggage) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	ctx = propagation.TraceContext{}.Extract(ctx, c)
	if len(a) == 0 {
		return ctx
	}
	all := baggage.FromContext(propagation.Baggage{}.Extract(ctx, c))
	var kept []baggage.Member
	for _, k := range a {
		if m := all.Member(k); m.Key() != "" {
			kept = append(kept, m)
		}
	}
	b, _ := baggage.New(kept...)
	return baggage.ContextWithBaggage(ctx, b)
}

func (allowBaggage) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	propagation.TraceContext{}.Inject(ctx, c)
	propagation.Baggage{}.Inject(ctx, c)
}

func (allowBaggage) Fields() []string { return []string{"traceparent", "tracestate", "baggage"} }

// WrapTransport fits downstream.Config.WrapTransport: otelhttp's transport,
// so every attempt to dep is a client span ("<dep> GET", orderagg.dependency
// set) under the guard's call span, and carries traceparent and the
// request's (allowed) baggage to the downstream. Its HTTP metrics are off:
// orderagg_dependency_attempt_duration_seconds measures each attempt.
func (t *Telemetry) WrapTransport(dep string, next http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(next,
		otelhttp.WithTracerProvider(t.tp),
		otelhttp.WithPropagators(allowBaggage(nil)),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return dep + " " + r.Method }),
		otelhttp.WithSpanOptions(trace.WithAttributes(attrSpanDependency.String(dep))),
	)
}
