package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
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

// redisotelScope is the instrumentation scope redisotel records under.
const redisotelScope = "github.com/redis/go-redis/extra/redisotel"

// Redis pool instruments this package records itself, in seconds.
const (
	nameRedisWaitTime   = "db.client.connections.waits_duration"
	nameRedisCreateTime = "db.client.connections.create_time"
	nameRedisUseTime    = "db.client.connections.use_time"
)

// secondsViews drop redisotel's instruments measured in ns or ms: Prometheus
// wants base units, and a view can rename a unit but not rescale the values.
// InstrumentRedis records the same three in seconds under this package's
// scope, so the series keep their names with a _seconds suffix.
var secondsViews = []sdkmetric.View{
	dropRedisotel(nameRedisWaitTime),
	dropRedisotel(nameRedisCreateTime),
	dropRedisotel(nameRedisUseTime),
}

func dropRedisotel(name string) sdkmetric.View {
	return sdkmetric.NewView(
		sdkmetric.Instrument{Name: name, Scope: instrumentation.Scope{Name: redisotelScope}},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationDrop{}},
	)
}

// InstrumentRedis adds OpenTelemetry to the last-good store's client.
//
// Metrics, always: the connection pool's gauges and counters from redisotel
// (db_client_connections_usage, _max, _waits_total, _timeouts_total, …,
// labelled with pool_name), which tell a Redis that is slow to answer from a
// pool that is too small, and, in seconds, the time spent waiting for a
// connection, dialling one and using one. Traces, when on: one client span
// per command or pipeline, child of the span in the command's context. The
// command line is left out of the span on purpose: it would hold whole
// cached answers (the write script's arguments), which makes spans large and
// copies order data into the tracing backend.
//
// Dials and the commands that set a new connection up (AUTH, HELLO, CLIENT,
// SELECT, READONLY) are not traced: they run outside any request, so each
// would be a trace of its own, one per pooled connection.
//
// Call it once, before the client is used.
func (t *Telemetry) InstrumentRedis(c redis.UniversalClient) error {
	var errs []error
	if err := redisotel.InstrumentMetrics(c,
		redisotel.WithMeterProvider(t.mp),
		// Monotonic counters for waits, timeouts, hits and misses, so
		// rate() works on them.
		redisotel.WithSemConvCompliantMetrics(true),
	); err != nil {
		errs = append(errs, fmt.Errorf("metrics: %w", err))
	}
	hook, err := t.newRedisHook(c)
	if err != nil {
		errs = append(errs, fmt.Errorf("metrics: %w", err))
	} else {
		// Added before redisotel's tracing hook, so it is the outer one:
		// its spans (cache reads and writes) hold redisotel's.
		c.AddHook(hook)
	}
	if t.tracing {
		if err := redisotel.InstrumentTracing(c,
			redisotel.WithTracerProvider(t.tp),
			redisotel.WithDBStatement(false),
			redisotel.WithDialFilter(true),
			redisotel.WithCommandFilter(connSetup),
			redisotel.WithCommandsFilter(func(cmds []redis.Cmder) bool {
				for _, c := range cmds {
					if !connSetup(c) {
						return false
					}
				}
				return true
			}),
		); err != nil {
			errs = append(errs, fmt.Errorf("tracing: %w", err))
		} else {
			c.AddHook(noScriptHook{}) // inside redisotel's: sees its span
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: redis: %w", err)
	}
	return nil
}

// connSetup reports the commands go-redis sends to set up a connection.
func connSetup(cmd redis.Cmder) bool {
	switch strings.ToLower(cmd.Name()) {
	case "auth", "hello", "client", "select", "readonly":
		return true
	}
	return false
}

// redisHook records the pool's timings in seconds and, when traces are on,
// shapes the cache's spans (see cachetrace.go).
type redisHook struct {
	t          *Telemetry
	createTime metric.Float64Histogram
	useTime    metric.Float64Histogram
	// attribute sets by outcome, built once
	dialOK, dialErr     metric.RecordOption
	cmdOK, cmdErr       metric.RecordOption
	pipelineOK, pipeErr metric.RecordOption
}

func (t *Telemetry) newRedisHook(c redis.UniversalClient) (*redisHook, error) {
	pool := poolName(c)
	wait, err1 := t.meter.Float64ObservableCounter(nameRedisWaitTime, metric.WithUnit("s"),
		metric.WithDescription("Total time spent waiting for a Redis connection from the pool."))
	create, err2 := t.meter.Float64Histogram(nameRedisCreateTime, metric.WithUnit("s"),
		metric.WithDescription("Time it took to create a new Redis connection."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	use, err3 := t.meter.Float64Histogram(nameRedisUseTime, metric.WithUnit("s"),
		metric.WithDescription("Time between borrowing a Redis connection and returning it to the pool, by command or pipeline."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	// The pool's labels as redisotel sets them on its own series.
	poolAttrs := []attribute.KeyValue{attribute.String("db.system", "redis"), attribute.String("pool.name", pool)}
	set := func(kvs ...attribute.KeyValue) metric.RecordOption {
		return metric.WithAttributeSet(attribute.NewSet(append(kvs, poolAttrs...)...))
	}
	ok, failed := attribute.String("status", "ok"), attribute.String("status", "error")
	cmd, pipe := attribute.String("type", "command"), attribute.String("type", "pipeline")
	poolSet := metric.WithAttributeSet(attribute.NewSet(poolAttrs...))
	if _, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveFloat64(wait, time.Duration(c.PoolStats().WaitDurationNs).Seconds(), poolSet)
		return nil
	}, wait); err != nil {
		return nil, err
	}
	return &redisHook{
		t: t, createTime: create, useTime: use,
		dialOK: set(ok), dialErr: set(failed),
		cmdOK: set(cmd, ok), cmdErr: set(cmd, failed),
		pipelineOK: set(pipe, ok), pipeErr: set(pipe, failed),
	}, nil
}

// poolName matches redisotel's pool.name: the (first) address.
func poolName(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		if a := c.Options().Addrs; len(a) > 0 {
			return a[0]
		}
	case *redis.Ring:
		for _, a := range c.Options().Addrs {
			return a
		}
	}
	return ""
}

func pick(err error, ok, failed metric.RecordOption) metric.RecordOption {
	if err != nil && !errors.Is(err, redis.Nil) {
		return failed
	}
	return ok
}

func (h *redisHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		start := time.Now()
		conn, err := next(ctx, network, addr)
		h.createTime.Record(ctx, time.Since(start).Seconds(), pick(err, h.dialOK, h.dialErr))
		return conn, err
	}
}

func (h *redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		if h.t.tracing {
			var end func(error)
			ctx, end = h.t.cacheSpan(ctx, cmd)
			defer func() { end(cmd.Err()) }()
		}
		err := next(ctx, cmd)
		h.useTime.Record(ctx, time.Since(start).Seconds(), pick(err, h.cmdOK, h.cmdErr))
		return err
	}
}

func (h *redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		if h.t.tracing {
			var end func(error)
			ctx, end = h.t.cacheBatchSpan(ctx, cmds)
			defer func() { end(nil) }()
		}
		err := next(ctx, cmds)
		h.useTime.Record(ctx, time.Since(start).Seconds(), pick(err, h.pipelineOK, h.pipeErr))
		return err
	}
}

// noEnd ends nothing: the command is not one the cache's spans shape.
func noEnd(error) {}

// cacheSpan starts the span a cache command belongs under, when it is one:
// a last-good read in a traced request gets "attempt cache" under its
// "fallback <dep>" span (see reqTrace.startCacheRead); a queued write re-sent
// alone after NOSCRIPT gets a "cache write" span linked to its request (one
// for the EVALSHA, one for the EVAL: the hook sees them one at a time).
func (t *Telemetry) cacheSpan(ctx context.Context, cmd redis.Cmder) (context.Context, func(error)) {
	if connSetup(cmd) {
		return ctx, noEnd // a new connection's set-up, run within the first command's context
	}
	if dep := cache.ReadFor(ctx); dep != "" {
		rt := reqTraceFrom(ctx)
		if rt == nil {
			return ctx, noEnd
		}
		ctx, sp := rt.startCacheRead(ctx, dep)
		if sp == nil {
			return ctx, noEnd
		}
		return ctx, func(err error) {
			if failed(err) {
				sp.RecordError(err)
				sp.SetStatus(codes.Error, err.Error())
			}
			sp.End()
		}
	}
	if origins := cache.WriteOrigins(ctx); len(origins) > 0 {
		ctx, sp := t.startWrite(ctx, origins)
		return ctx, func(err error) {
			if failed(err) && !noScript(err) { // see noScriptHook
				sp.SetStatus(codes.Error, err.Error())
			}
			sp.End()
		}
	}
	return ctx, noEnd
}

// cacheBatchSpan starts the "cache write" span of a batch of queued writes.
// It is a root of its own — the write runs after the requests ended, batched
// across them — linked to each request's span. It fails only for an error
// other than NOSCRIPT: the writer re-sends those entries in full, and that
// command has a span (and an outcome) of its own.
func (t *Telemetry) cacheBatchSpan(ctx context.Context, cmds []redis.Cmder) (context.Context, func(error)) {
	origins := cache.WriteOrigins(ctx)
	if len(origins) == 0 || !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return !connSetup(c) }) {
		return ctx, noEnd
	}
	ctx, sp := t.startWrite(ctx, origins)
	return ctx, func(error) {
		for _, c := range cmds {
			if err := c.Err(); failed(err) && !noScript(err) {
				sp.SetStatus(codes.Error, err.Error())
				break
			}
		}
		sp.End()
	}
}

func (t *Telemetry) startWrite(ctx context.Context, origins []context.Context) (context.Context, trace.Span) {
	// One link per request: a batch often holds several sections of the
	// same page, and a repeated link says nothing more.
	links := make([]trace.Link, 0, len(origins))
	for _, o := range origins {
		sc := trace.SpanContextFromContext(o)
		if sc.IsValid() && !slices.ContainsFunc(links, func(l trace.Link) bool { return l.SpanContext.Equal(sc) }) {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return t.tracer.Start(ctx, "cache write",
		trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(links...),
		trace.WithAttributes(attrSpanDependency.String(cacheDependency), attrSpanEntries.Int(len(origins))))
}

func failed(err error) bool { return err != nil && !errors.Is(err, redis.Nil) }

func noScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// noScriptHook runs inside redisotel's tracing hook. An EVALSHA that Redis
// answers NOSCRIPT (its script cache was emptied, by a restart for
// instance) is followed at once by an EVAL of the full script — go-redis's
// Script.Run and the cache writer both do that — so it is not a failure:
// the command's span is set Ok, which the SDK keeps over the Error that
// redisotel then sets. The EVAL's own span says whether the write worked.
type noScriptHook struct{}

func (noScriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (noScriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if noScript(err) {
			trace.SpanFromContext(ctx).SetStatus(codes.Ok, "")
		}
		return err
	}
}

func (noScriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err == nil {
			return nil
		}
		for _, c := range cmds {
			if failed(c.Err()) && !noScript(c.Err()) {
				return err
			}
		}
		trace.SpanFromContext(ctx).SetStatus(codes.Ok, "")
		return err
	}
}
