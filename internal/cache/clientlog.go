package cache

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// clientLogger carries go-redis's own log lines (failed dials, lost
// connections) into slog, at the same bounded rate as the store's write
// errors: left alone, go-redis prints one line per failed dial to stderr,
// which during an outage is one per command.
type clientLogger struct {
	log   *slog.Logger
	now   func() time.Time
	limit logLimiter
}

// Printf implements go-redis's logging interface.
func (l *clientLogger) Printf(ctx context.Context, format string, v ...any) {
	if ok, suppressed := l.limit.allow(l.now()); ok {
		l.log.WarnContext(ctx, "redis client: "+fmt.Sprintf(format, v...),
			"suppressed_since_last", suppressed)
	}
}

// routeClientLogs makes go-redis log through logger. go-redis has a single,
// process-wide logger, so the Store opened last is the one that logs; a
// process holds one Store, so that is the right one.
func routeClientLogs(logger *slog.Logger, every time.Duration, now func() time.Time) {
	redis.SetLogger(&clientLogger{log: logger, now: now, limit: logLimiter{every: every}})
}
