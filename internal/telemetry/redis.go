package telemetry

import (
	"fmt"
	"slices"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
)

// InstrumentRedis adds redisotel to the last-good store's client: its pool
// metrics (db_client_connections_*, labelled pool_name, in redisotel's
// units) and, with traces on, a client span per command or pipeline without
// its arguments (they hold whole cached answers). Call it once, before the
// client is used.
func (t *Telemetry) InstrumentRedis(c redis.UniversalClient) error {
	err := redisotel.InstrumentMetrics(c, redisotel.WithMeterProvider(t.mp), redisotel.WithSemConvCompliantMetrics(true))
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
