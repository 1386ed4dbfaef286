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

// Env is what a program gets from its surroundings. Every field may be
// left zero: logs go to os.Stderr, no reloads come, nobody is told, spans
// go to the exporter OTEL_TRACES_EXPORTER names, and a character device
// counts as a terminal.
type Env struct {
	Stderr       io.Writer             // the structured logs, JSON lines
	Reload       <-chan os.Signal      // config reload requests (SIGHUP in main)
	OnReady      func(Addrs)           // told the bound addresses once serving
	Version      string                // the build's version, as service.version
	IsTerminal   func(io.Writer) bool  // a terminal Stderr also gets the demo's fault commands as plain lines
	SpanExporter sdktrace.SpanExporter // every span, in place of OTEL_TRACES_EXPORTER's
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
	st, err := f.Stat()
	return ok && err == nil && st.Mode()&os.ModeCharDevice != 0
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
