package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/orderagg/orderagg/internal/cache"
)

// redisotelViews drop redisotel's three timings, which it measures in ms
// and ns: Prometheus wants seconds, and a view cannot rescale. poolTimes
// records them in seconds under the same names.
var redisotelViews = []sdkmetric.View{
	dropRedisotel("db.client.connections.waits_duration"),
	dropRedisotel("db.client.connections.create_time"),
	dropRedisotel("db.client.connections.use_time"),
}

func dropRedisotel(name string) sdkmetric.View {
	return sdkmetric.NewView(
		sdkmetric.Instrument{Name: name, Scope: instrumentation.Scope{Name: "github.com/redis/go-redis/extra/redisotel"}},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationDrop{}})
}

// InstrumentRedis adds redisotel to the last-good store's client: the
// pool's metrics (db_client_connections_*, labelled pool_name) and, with
// traces on, a client span per command or pipeline without its arguments
// (they hold whole cached answers). A batch of queued writes gets a
// "cache write" span of its own, linked to each request whose answer it
// stores. Call it once, before the client is used.
func (t *Telemetry) InstrumentRedis(c redis.UniversalClient) error {
	err := redisotel.InstrumentMetrics(c, redisotel.WithMeterProvider(t.mp), redisotel.WithSemConvCompliantMetrics(true))
	if err == nil {
		err = t.poolTimes(c)
	}
	if err == nil && t.tracing {
		c.AddHook(writeSpans{t.tracer}) // outside redisotel's: holds its spans
		err = redisotel.InstrumentTracing(c, redisotel.WithTracerProvider(t.tp), redisotel.WithDBStatement(false),
			redisotel.WithDialFilter(true), redisotel.WithCommandFilter(connSetup), redisotel.WithCommandsFilter(allConnSetup))
	}
	if err != nil {
		return fmt.Errorf("telemetry: redis: %w", err)
	}
	return nil
}

// connSetup reports the commands go-redis sends to set a new connection up,
// which are not traced: each would otherwise be a trace of its own.
func connSetup(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "auth", "hello", "client", "select", "readonly":
		return true
	}
	return false
}

func allConnSetup(cmds []redis.Cmder) bool {
	return !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return !connSetup(c) })
}

// poolTimesHook records, in seconds, the time spent waiting for a connection,
// dialling one and using one (by type, command or pipeline, and status).
type poolTimesHook struct {
	create, use metric.Float64Histogram
	pool        []attribute.KeyValue
}

func (t *Telemetry) poolTimes(c redis.UniversalClient) error {
	pool := []attribute.KeyValue{attribute.String("db.system", "redis"), attribute.String("pool.name", poolName(c))}
	_, err1 := t.meter.Float64ObservableCounter("db.client.connections.waits_duration", metric.WithUnit("s"),
		metric.WithDescription("Total time spent waiting for a Redis connection from the pool."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(time.Duration(c.PoolStats().WaitDurationNs).Seconds(), metric.WithAttributes(pool...))
			return nil
		}))
	create, err2 := t.meter.Float64Histogram("db.client.connections.create_time", metric.WithUnit("s"),
		metric.WithDescription("Time it took to create a new Redis connection."), metric.WithExplicitBucketBoundaries(latencyBuckets...))
	use, err3 := t.meter.Float64Histogram("db.client.connections.use_time", metric.WithUnit("s"),
		metric.WithDescription("Time between borrowing a Redis connection and returning it to the pool, by command or pipeline."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	c.AddHook(poolTimesHook{create: create, use: use, pool: pool})
	return nil
}

// poolName is redisotel's pool.name: the (first) address.
func poolName(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		if a := c.Options().Addrs; len(a) > 0 {
			return a[0]
		}
	}
	return ""
}

func (h poolTimesHook) attrs(typ string, err error) metric.MeasurementOption {
	status := "ok"
	if err != nil && !errors.Is(err, redis.Nil) {
		status = "error"
	}
	kvs := append([]attribute.KeyValue{attribute.String("status", status)}, h.pool...)
	if typ != "" {
		kvs = append(kvs, attribute.String("type", typ))
	}
	return metric.WithAttributes(kvs...)
}

func (h poolTimesHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		start := time.Now()
		conn, err := next(ctx, network, addr)
		h.create.Record(ctx, time.Since(start).Seconds(), h.attrs("", err))
		return conn, err
	}
}

func (h poolTimesHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h.use.Record(ctx, time.Since(start).Seconds(), h.attrs("command", err))
		return err
	}
}

func (h poolTimesHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		h.use.Record(ctx, time.Since(start).Seconds(), h.attrs("pipeline", err))
		return err
	}
}

// writeSpans starts the "cache write" span of a command or pipeline that
// stores queued answers (cache.WriteOrigins): a root of its own, since the
// write runs after the requests ended, linked to each request's span.
type writeSpans struct{ tracer trace.Tracer }

func (w writeSpans) start(ctx context.Context) (context.Context, trace.Span) {
	origins := cache.WriteOrigins(ctx)
	if len(origins) == 0 {
		return ctx, nil
	}
	var links []trace.Link
	seen := map[trace.SpanID]bool{}
	for _, o := range origins {
		if sc := trace.SpanContextFromContext(o); sc.IsValid() && !seen[sc.SpanID()] {
			seen[sc.SpanID()] = true
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return w.tracer.Start(ctx, "cache write", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(attrSpanDependency.String("cache"), attrSpanEntries.Int(len(origins))))
}

func end(span trace.Span, err error) {
	if span == nil {
		return
	}
	// After NOSCRIPT the writer re-sends the entry whole, in a write of its own.
	if err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (writeSpans) DialHook(next redis.DialHook) redis.DialHook { return next }

func (w writeSpans) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if connSetup(cmd) {
			return next(ctx, cmd)
		}
		ctx, span := w.start(ctx)
		err := next(ctx, cmd)
		end(span, err)
		return err
	}
}

func (w writeSpans) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if allConnSetup(cmds) {
			return next(ctx, cmds)
		}
		ctx, span := w.start(ctx)
		err := next(ctx, cmds)
		end(span, err)
		return err
	}
}
