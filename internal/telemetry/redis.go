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
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// redisotelViews drop redisotel's connection timings, which it records in ms
// and ns: a view cannot rescale, and Prometheus wants seconds. redisTimes
// records them in seconds under the same names.
var redisotelViews = []sdkmetric.View{func(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	drop := i.Scope.Name == "github.com/redis/go-redis/extra/redisotel" && (i.Unit == "ms" || i.Unit == "ns")
	return sdkmetric.Stream{Name: i.Name, Aggregation: sdkmetric.AggregationDrop{}}, drop
}}

// InstrumentRedis adds redisotel to the last-good store's client: the pool's
// metrics (db_client_connections_*, labelled pool_name) and, with traces on,
// a client span per command or pipeline without its arguments (they hold
// whole cached answers). Call it once, before the client is used.
func (t *Telemetry) InstrumentRedis(c redis.UniversalClient) error {
	err := redisotel.InstrumentMetrics(c, redisotel.WithMeterProvider(t.mp), redisotel.WithSemConvCompliantMetrics(true))
	if err == nil {
		err = t.redisTimes(c)
	}
	if err == nil && t.tracing {
		err = redisotel.InstrumentTracing(c, redisotel.WithTracerProvider(t.tp), redisotel.WithDBStatement(false),
			redisotel.WithDialFilter(true), redisotel.WithCommandFilter(connSetup), redisotel.WithCommandsFilter(allConnSetup))
	}
	if err != nil {
		return fmt.Errorf("telemetry: redis: %w", err)
	}
	return nil
}

// connSetup reports the commands go-redis sends to set a new connection up,
// which are not traced: each would be a trace of its own, failed where the
// server does not know CLIENT SETINFO.
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

// redisTimes is a hook recording, in seconds, the time spent dialling a
// connection and using one (by type, command or pipeline, and status).
type redisTimes struct {
	create, use metric.Float64Histogram
	pool        []attribute.KeyValue // redisotel's: db.system and pool.name
}

// redisTimes also observes the total time spent waiting for a connection.
func (t *Telemetry) redisTimes(c redis.UniversalClient) error {
	var pool string
	switch c := c.(type) {
	case *redis.Client:
		pool = c.Options().Addr
	case *redis.ClusterClient:
		if a := c.Options().Addrs; len(a) > 0 {
			pool = a[0]
		}
	}
	h := redisTimes{pool: []attribute.KeyValue{attribute.String("db.system", "redis"), attribute.String("pool.name", pool)}}
	_, err1 := t.meter.Float64ObservableCounter("db.client.connections.waits_duration", metric.WithUnit("s"),
		metric.WithDescription("Total time spent waiting for a Redis connection from the pool."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(time.Duration(c.PoolStats().WaitDurationNs).Seconds(), metric.WithAttributes(h.pool...))
			return nil
		}))
	var err2, err3 error
	h.create, err2 = t.meter.Float64Histogram("db.client.connections.create_time", metric.WithUnit("s"),
		metric.WithDescription("Time it took to create a new Redis connection."), metric.WithExplicitBucketBoundaries(latencyBuckets...))
	h.use, err3 = t.meter.Float64Histogram("db.client.connections.use_time", metric.WithUnit("s"),
		metric.WithDescription("Time between borrowing a Redis connection and returning it to the pool, by command or pipeline."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	c.AddHook(h)
	return nil
}

func (h redisTimes) record(ctx context.Context, hist metric.Float64Histogram, start time.Time, typ string, err error) {
	status := "ok"
	if err != nil && !errors.Is(err, redis.Nil) {
		status = "error"
	}
	kvs := append([]attribute.KeyValue{attribute.String("status", status)}, h.pool...)
	if typ != "" {
		kvs = append(kvs, attribute.String("type", typ))
	}
	hist.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(kvs...))
}

func (h redisTimes) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		start := time.Now()
		conn, err := next(ctx, network, addr)
		h.record(ctx, h.create, start, "", err)
		return conn, err
	}
}

func (h redisTimes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h.record(ctx, h.use, start, "command", err)
		return err
	}
}

func (h redisTimes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		h.record(ctx, h.use, start, "pipeline", err)
		return err
	}
}
