// Package app wires orderagg's parts into the running programs: Serve (the
// order-detail service) and RunSim (the simulated downstreams). It owns
// every long-lived goroutine and closes everything it opened, last first,
// on the way out. cmd/orderagg parses arguments and signals and calls in
// here, so tests start the real service in-process.
package app

import (
	"io"
	"log/slog"
	"os"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/orderagg/orderagg/internal/telemetry"
)

// Env is what a program gets from its surroundings. Zero fields mean: logs
// to os.Stderr, no reloads, nobody told, the OTEL_TRACES_EXPORTER exporter,
// and a character-device check for a terminal.
type Env struct {
	// Stderr receives the structured logs (JSON lines).
	Stderr io.Writer
	// Reload delivers config reload requests (SIGHUP in main).
	Reload <-chan os.Signal
	// OnReady is told the bound addresses once serving.
	OnReady func(Addrs)
	// Version is the build's version, reported as service.version.
	Version string
	// IsTerminal reports whether w is a terminal. In demo mode a terminal
	// Stderr also gets the fault commands as plain lines that paste into a
	// shell.
	IsTerminal func(w io.Writer) bool
	// SpanExporter receives every span in place of the exporter
	// OTEL_TRACES_EXPORTER names.
	SpanExporter sdktrace.SpanExporter
}

// Addrs are the addresses a running program listens on.
type Addrs struct {
	API   string
	Admin string // empty when the admin API is off
	Sim   string // the simulators' address: RunSim's, or the embedded ones in demo mode
}

// isTerminal reports whether w is a character device (a terminal, or
// /dev/null, where the extra lines do no harm); pipes, files and sockets,
// where log collectors read, are not.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newLogger writes JSON lines to w (os.Stderr when nil), each carrying
// the trace and span ids of its context when there are any, and durations
// as "1.5s" rather than nanoseconds.
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
