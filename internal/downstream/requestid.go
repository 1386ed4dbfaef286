package downstream

import "context"

type requestIDKey struct{}

// WithRequestID returns a copy of ctx carrying the request id, which every
// client forwards as X-Request-Id so one id follows a request across
// services.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id ctx carries, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
