// Package app wires orderagg's parts into the running programs, Serve and
// RunSim. It owns every long-lived goroutine and closes what it opened,
// last first, on the way out; cmd/orderagg only parses arguments and
// signals, so tests run the real service in-process.
package app

import (
	"io"
	"log/slog"
	"os"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/orderagg/orderagg/internal/telemetry"
)

// Env is what a program gets from its surroundings. Every field may be
// zero: logs go to os.Stderr, no reloads come, nobody is told, and spans go
// to the exporter OTEL_TRACES_EXPORTER names.
type Env struct {
	Stderr       io.Writer             // the structured logs, JSON lines
	Reload       <-chan os.Signal      // config reload requests (SIGHUP in main)
	OnReady      func(Addrs)           // told the bound addresses once serving
	Version      string                // the build's version, as service.version
	SpanExporter sdktrace.SpanExporter // every span, in place of OTEL_TRACES_EXPORTER's
}

// Addrs are the addresses a running program listens on.
type Addrs struct {
	API   string
	Admin string // empty when the admin API is off
	Sim   string // the simulators': RunSim's, or the embedded ones in demo mode
}

// newLogger writes JSON lines to w (os.Stderr when nil), each carrying the
// trace and span ids of its context, and durations as "1.5s".
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	if w == nil {
		w = os.Stderr
	}
	return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		},
	})))
}
