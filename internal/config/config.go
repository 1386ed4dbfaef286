// Package config reads orderagg's configuration once, at the edge: the
// command-line flags, their ORDERAGG_* environment twins and the YAML file of
// per-dependency settings, into plain structs whose defaults are visible in
// one place (DefaultServe, DefaultSim, DefaultDependencies). Other packages
// are handed the values they need and never read the environment themselves.
//
// Precedence, highest first: a flag on the command line, its environment
// variable, the built-in default. The --config file then overrides the
// built-in per-dependency settings, key by key. Every bad value stops the
// start-up with a one-line error that names the flag (and its variable) or
// the file key, and matches ErrUsage.
//
// The package holds no state: every function is safe for concurrent use, and
// none modifies its arguments.
package config

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/orderagg/orderagg/internal/cache"
	"github.com/orderagg/orderagg/internal/registry"
)

// Admission modes (--admission).
const (
	AdmissionFixed    = "fixed"
	AdmissionAdaptive = "adaptive"
)

// Serve is the configuration of `orderagg serve`.
type Serve struct {
	// Addr is the listen address of the order-detail API. Default
	// 127.0.0.1:8080: loopback unless asked otherwise, so a demo run is not
	// exposed; the container image sets :8080. Port 0 picks a free port (the
	// ready log line says which).
	Addr string

	// URLs are the downstreams' base URLs (http or https), by registered
	// name (--order-url sets URLs["order"]). All empty, the default, means
	// the simulators run in-process (embedded demo mode); some but not all
	// set is an error, because a half-real, half-simulated page would be
	// misleading. Copies of a Serve share the map: replace it, never change
	// it in place.
	URLs map[string]string

	// RedisURL (redis:// or rediss://) is the last-good cache. Empty, the
	// default, means an embedded in-process server: fine for a demo, but
	// not durable.
	RedisURL string

	// Deadline is the whole budget of one order-detail request, from arrival
	// to the answer. Default 1500ms, the page's latency promise.
	Deadline time.Duration

	// Reserve is kept back from the deadline for the fallbacks (last-good
	// reads), assembly and encoding: every sub-budget is cut to the time left
	// minus the reserve. Default 100ms, two cache timeouts. Must be shorter
	// than Deadline.
	Reserve time.Duration

	// MaxInflight bounds the order-detail requests served at once; the next
	// one gets an immediate 503 OVERLOADED. Default 1024: well above the sum
	// of the downstream bulkheads (250), so the bulkheads, which degrade a
	// section, act long before admission, which refuses the page.
	MaxInflight int

	// MaxEventStreams bounds the dashboard's event streams open at once;
	// the next gets 503 TOO_MANY_STREAMS. Default 100.
	MaxEventStreams int

	// Admission is how the in-flight limit is set: AdmissionFixed (the
	// default) holds it at MaxInflight; AdmissionAdaptive lowers it below
	// MaxInflight while requests queue in this process (a latency gradient,
	// internal/admission) and raises it back when they stop.
	Admission string

	// ConfigFile is the YAML file of per-dependency settings; empty, the
	// default, means the built-in ones. It is re-read on SIGHUP.
	ConfigFile string

	// AdminAddr is the admin API's listen address; empty, the default, means
	// off. AdminToken is the bearer token it requires; an admin address
	// without a token is an error, because the admin API changes live
	// settings and must never run unauthenticated.
	AdminAddr, AdminToken string

	// ReadHeaderTimeout bounds how long a client may take to send a
	// request's headers; a slower one is disconnected. It keeps clients that
	// dribble their headers (slowloris) from holding connections and
	// goroutines. Default 5s: a real client sends its headers in one packet.
	ReadHeaderTimeout time.Duration

	// ShutdownTimeout bounds the graceful drain on SIGINT/SIGTERM. Default
	// 10s: in-flight requests need at most a deadline (1.5s); the rest is for
	// flushing telemetry and closing the cache.
	ShutdownTimeout time.Duration

	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string

	// Dependencies are the per-dependency settings in force at start-up:
	// DefaultDependencies() with the --config file laid over them.
	Dependencies Dependencies
}

// DefaultServe returns serve's built-in configuration, what ParseServe gives
// for an empty command line and environment.
func DefaultServe() Serve {
	return Serve{
		Addr:              "127.0.0.1:8080",
		Deadline:          1500 * time.Millisecond,
		Reserve:           100 * time.Millisecond,
		MaxInflight:       1024,
		MaxEventStreams:   100,
		Admission:         AdmissionFixed,
		ShutdownTimeout:   10 * time.Second,
		ReadHeaderTimeout: 5 * time.Second,
		LogLevel:          "info",
		Dependencies:      DefaultDependencies(),
		URLs:              map[string]string{},
	}
}

// EmbeddedDownstreams reports whether the simulators must run in-process:
// no downstream URL is set (ParseServe has made sure it is all or none).
func (s Serve) EmbeddedDownstreams() bool {
	for _, u := range s.URLs {
		if u != "" {
			return false
		}
	}
	return true
}

// SameURL returns URLs with every registered downstream at base, as one
// `orderagg sim` serves them all.
func SameURL(base string) map[string]string {
	out := make(map[string]string)
	for _, name := range registry.Names() {
		out[name] = base
	}
	return out
}

// SlogLevel is LogLevel as a slog.Level.
func (s Serve) SlogLevel() slog.Level { return slogLevel(s.LogLevel) }

// LoadDependencies returns the per-dependency settings that s's ConfigFile
// describes, laid over DefaultDependencies() (so a key removed from the file
// returns to its default) and validated against s.Deadline. Without a file it
// returns the defaults. It is what ParseServe runs at start-up and what a
// SIGHUP reload should run: on error, keep the settings in force.
func (s Serve) LoadDependencies() (Dependencies, error) {
	deps := DefaultDependencies()
	if s.ConfigFile != "" {
		var err error
		if deps, err = LoadDependencies(s.ConfigFile, deps); err != nil {
			return Dependencies{}, err
		}
	}
	if err := deps.Validate(s.Deadline); err != nil {
		if s.ConfigFile != "" {
			return Dependencies{}, fmt.Errorf("config file %s: %w", s.ConfigFile, err)
		}
		return Dependencies{}, err
	}
	return deps, nil
}

// LogValue implements slog.LogValuer so the configuration can be logged at
// start-up without leaking secrets: the admin token is replaced and
// passwords in URLs are masked. The per-dependency settings are left out
// (they have their own endpoint, GET /admin/dependencies).
func (s Serve) LogValue() slog.Value {
	token := ""
	if s.AdminToken != "" {
		token = "REDACTED"
	}
	attrs := []slog.Attr{slog.String("addr", s.Addr)}
	for _, name := range registry.Names() {
		attrs = append(attrs, slog.String(name+"_url", redactURL(s.URLs[name])))
	}
	return slog.GroupValue(append(attrs,
		slog.String("redis_url", redactURL(s.RedisURL)),
		slog.Duration("deadline", s.Deadline),
		slog.Duration("reserve", s.Reserve),
		slog.Int("max_inflight", s.MaxInflight),
		slog.String("admission", s.Admission),
		slog.String("config", s.ConfigFile),
		slog.String("admin_addr", s.AdminAddr),
		slog.String("admin_token", token),
		slog.Duration("read_header_timeout", s.ReadHeaderTimeout),
		slog.Duration("shutdown_timeout", s.ShutdownTimeout),
		slog.String("log_level", s.LogLevel),
	)...)
}

// Sim is the configuration of `orderagg sim`.
type Sim struct {
	// Addr serves all four simulated services. Default 127.0.0.1:9100, away
	// from serve's 8080 so both run side by side.
	Addr string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
}

// DefaultSim returns sim's built-in configuration.
func DefaultSim() Sim {
	return Sim{Addr: "127.0.0.1:9100", LogLevel: "info"}
}

// SlogLevel is LogLevel as a slog.Level.
func (s Sim) SlogLevel() slog.Level { return slogLevel(s.LogLevel) }

// logLevels are the names --log-level accepts, in usage order.
var logLevels = []string{"debug", "info", "warn", "error"}

func slogLevel(name string) slog.Level {
	switch name {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// redactURL hides the passwords of a URL, in its user information and in
// its query (Sentinel URLs carry them there), for logs.
func redactURL(raw string) string { return cache.RedactURL(raw) }
