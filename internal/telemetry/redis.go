package telemetry

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
)

// InstrumentRedis adds OpenTelemetry to the last-good store's client.
//
// Metrics, always: the connection pool's gauges and counters from redisotel
// (db_client_connections_usage, _max, _waits_total, _timeouts_total, …,
// labelled with pool_name), which tell a Redis that is slow to answer from a
// pool that is too small. Traces, when on: one client span per command or
// pipeline, child of the request's span. The command line is left out of the
// span on purpose: it would hold whole cached answers (the write script's
// arguments), which makes spans large and copies order data into the
// tracing backend.
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
