package app

import (
	"log"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Server errors are written at most errorLogBurst to an errorLogWindow; the
// rest are counted and the count is reported with the next line written.
const (
	errorLogBurst  = 10
	errorLogWindow = 10 * time.Second
)

// serverErrorLog is the log.Logger an http.Server reports to: failed
// accepts, TLS handshakes, panics and bad requests it handles itself. They
// are WARN, since they mean clients or the host are in trouble, but rate
// limited, since a scanner or a failing accept loop produces them by the
// thousand.
func serverErrorLog(logger *slog.Logger) *log.Logger {
	return log.New(&limitedLog{logger: logger, burst: errorLogBurst, window: errorLogWindow, now: time.Now}, "", 0)
}

// limitedLog writes each line as a WARN record, at most burst a window.
type limitedLog struct {
	logger *slog.Logger
	burst  int
	window time.Duration
	now    func() time.Time

	mu         sync.Mutex
	start      time.Time // of the current window
	written    int       // lines written in it
	suppressed int       // lines dropped since the last one written
}

func (l *limitedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	now := l.now()
	if now.Sub(l.start) >= l.window {
		l.start, l.written = now, 0
	}
	if l.written >= l.burst {
		l.suppressed++
		l.mu.Unlock()
		return len(p), nil
	}
	l.written++
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()

	args := []any{"err", strings.TrimSpace(string(p))}
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	l.logger.Warn("http server error", args...)
	return len(p), nil
}
