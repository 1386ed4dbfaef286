// Package config reads orderagg's configuration once, at the edge: the
// command-line flags and their ORDERAGG_* environment twins (parsed by
// github.com/peterbourgon/ff) and the YAML file of per-dependency settings
// (decoded strictly by yaml.v3), into plain structs whose defaults are
// visible in one place (DefaultServe, DefaultSim, DefaultDependencies).
// Other packages are handed the values they need and never read the
// environment themselves.
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
	"io"
	"log/slog"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/orderagg/orderagg/internal/cache"
	"github.com/orderagg/orderagg/internal/downstream"
)

// Admission modes (--admission).
const (
	AdmissionFixed    = "fixed"
	AdmissionAdaptive = "adaptive"
)

// Serve is the configuration of `orderagg serve`.
type Serve struct {
	// Addr is the listen address of the order-detail API. Default
	// 127.0.0.1:8080, so a demo run is not exposed (the image sets :8080).
	Addr string

	// URLs are the downstreams' base URLs by registered name (--order-url
	// sets URLs["order"]), DownstreamsURL filling those left empty. All
	// empty means embedded demo mode; some but not all is an error, as a
	// half-simulated page would mislead. Copies share the map: replace it.
	URLs map[string]string

	// DownstreamsURL is the base URL of every downstream without its own, so
	// a deployment naming only it needs no edit for a new downstream.
	DownstreamsURL string

	// RedisURL is the last-good cache; empty means an embedded, not durable,
	// in-process server.
	RedisURL string

	// Deadline is the whole budget of one order-detail request. Default
	// 1500ms, the page's latency promise.
	Deadline time.Duration

	// Reserve is kept back from the deadline for the fallbacks (last-good
	// reads), assembly and encoding: every sub-budget is cut to the time left
	// minus the reserve. Default 100ms, two cache timeouts. Must be shorter
	// than Deadline.
	Reserve time.Duration

	// MaxInflight bounds the order-detail requests served at once; the next
	// one gets an immediate 503 OVERLOADED. Default DefaultMaxInflight. It
	// is the one limit of orderagg's own that sheds load: every built-in
	// bulkhead is sized from it (Dependencies.MinBulkhead), so a healthy
	// dependency is never refused a call while admission lets a page in.
	MaxInflight int

	// Admission is how the in-flight limit is set: AdmissionFixed (the
	// default) holds it at MaxInflight; AdmissionAdaptive lowers it below
	// MaxInflight while requests queue in this process (a latency gradient,
	// internal/admission) and raises it back when they stop.
	Admission string

	// ConfigFile is the YAML file of per-dependency settings, re-read on
	// SIGHUP; empty means the built-in ones.
	ConfigFile string

	// AdminAddr is the admin API's address; empty means off. AdminToken is
	// the bearer token it requires, given directly or read from
	// AdminTokenFile (out of the process list); it is required with an
	// address, and at least MinAdminToken bytes: the API changes live settings.
	AdminAddr, AdminToken, AdminTokenFile string

	// MaxEventStreams bounds the dashboard's live event streams (the next
	// gets a 503). Default 100: each holds a connection while a tab is open.
	MaxEventStreams int

	// ReadHeaderTimeout disconnects a client that dribbles its headers
	// (slowloris). Default 5s: a real client sends them in one packet.
	ReadHeaderTimeout time.Duration

	// ShutdownTimeout bounds the graceful drain on SIGINT/SIGTERM. Default
	// 10s: in-flight requests need at most a deadline (1.5s); the rest is for
	// flushing telemetry and closing the cache.
	ShutdownTimeout time.Duration

	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string

	// AllowedHosts are the Host names served besides the loopback ones
	// when listening on loopback ("*": any); see internal/hostguard.
	AllowedHosts []string

	// Dependencies are the per-dependency settings in force at start-up:
	// DefaultDependenciesFor(MaxInflight) with the --config file laid over
	// them.
	Dependencies Dependencies
}

// DefaultMaxInflight is --max-inflight's default. By Little's law 1024
// pages in flight carry 680 pages/s even when every page runs to the 1500ms
// deadline (a hung order), and about 10,000/s at a 100ms page: more than one
// instance serves, so admission refuses pages only when the process itself
// is saturated or its dependencies are slow at a rate it cannot carry.
const DefaultMaxInflight = 1024

// MaxMaxInflight bounds --max-inflight: the bulkheads, and the downstream
// connection pools, are multiples of it.
const MaxMaxInflight = 1 << 20

// DefaultServe returns serve's built-in configuration, what ParseServe gives
// for an empty command line and environment.
func DefaultServe() Serve {
	return Serve{
		Addr:              "127.0.0.1:8080",
		Deadline:          1500 * time.Millisecond,
		Reserve:           100 * time.Millisecond,
		MaxInflight:       DefaultMaxInflight,
		Admission:         AdmissionFixed,
		ShutdownTimeout:   10 * time.Second,
		ReadHeaderTimeout: 5 * time.Second,
		LogLevel:          "info",
		MaxEventStreams:   100,
		Dependencies:      DefaultDependencies(),
		URLs:              map[string]string{},
	}
}

// MinAdminToken is the shortest admin token accepted, in bytes: 16 random
// bytes are out of reach of guessing.
const MinAdminToken = 16

// ParseServe reads serve's configuration from args (after the sub-command)
// and the ORDERAGG_* variables of the process environment, then loads the
// --config file. --help returns flag.ErrHelp (print ServeUsage, exit 0);
// every other error is one line naming the flag and its variable, or the
// file key, matches ErrUsage (exit 2), and never repeats a password.
func ParseServe(args []string) (Serve, error) { return parseServe(args, true) }

// ParseServeArgs is ParseServe without the environment, for in-process
// services (tests, the load tool's experiments) that must not depend on the
// caller's shell.
func ParseServeArgs(args []string) (Serve, error) { return parseServe(args, false) }

func parseServe(args []string, env bool) (Serve, error) {
	s := DefaultServe()
	if err := serveFlags(&s).Parse(args, env); err != nil {
		return Serve{}, err
	}
	if err := s.resolve(); err != nil {
		return Serve{}, usage(err)
	}
	deps, err := s.LoadDependencies()
	if err != nil {
		return Serve{}, usage(err)
	}
	s.Dependencies = deps
	return s, nil
}

// ParseSim is ParseServe for `orderagg sim`.
func ParseSim(args []string) (Sim, error) {
	s := DefaultSim()
	if err := simFlags(&s).Parse(args, true); err != nil {
		return Sim{}, err
	}
	return s, nil
}

// ServeTable lists serve's flags in --help order, with their defaults.
func ServeTable() []FlagDoc {
	s := DefaultServe()
	return serveFlags(&s).Table()
}

// SimTable lists sim's flags in --help order, with their defaults.
func SimTable() []FlagDoc {
	s := DefaultSim()
	return simFlags(&s).Table()
}

// ServeUsage writes serve's --help text.
func ServeUsage(w io.Writer) {
	WriteUsage(w, "orderagg serve [flags]", "Runs the order-detail service (the default command).", ServeTable())
}

// SimUsage writes sim's --help text.
func SimUsage(w io.Writer) {
	WriteUsage(w, "orderagg sim [flags]", "Runs the four simulated downstream services, with fault injection.", SimTable())
}

var (
	webSchemes   = []string{"http", "https"}
	redisSchemes = []string{"redis", "rediss"}
	// admissionModes are the values --admission accepts.
	admissionModes = []string{AdmissionFixed, AdmissionAdaptive}
)

func serveFlags(s *Serve) *Flags {
	f := NewFlags("serve")
	f.Addr(&s.Addr, "addr", "listen address of the order-detail API", false)
	// One --NAME-url per registered downstream. The map is replaced, not
	// changed, so a copy of the defaults is never written through.
	s.URLs = maps.Clone(s.URLs)
	if s.URLs == nil {
		s.URLs = map[string]string{}
	}
	for _, name := range downstream.Names() {
		f.Func(name+"-url", "URL", "base URL of the "+name+" service; empty: --downstreams-url", func() string { return s.URLs[name] },
			func(v string) error {
				if err := CheckURL(v, webSchemes, false); err != nil {
					return err
				}
				s.URLs[name] = v
				return nil
			})
	}
	f.URL(&s.DownstreamsURL, "downstreams-url", "base URL of every downstream without its own --NAME-url (one orderagg sim serves them all); all empty: embedded simulators", webSchemes, false)
	f.URL(&s.RedisURL, "redis-url", "redis:// or rediss:// URL of the last-good cache; empty: embedded, not durable", redisSchemes, true)
	f.Duration(&s.Deadline, "deadline", "total budget of one order-detail request", false)
	f.Duration(&s.Reserve, "reserve", "part of the deadline kept back for fallbacks, assembly and encoding", false)
	f.Int(&s.MaxInflight, "max-inflight", "order-detail requests served at once; beyond it an immediate 503 OVERLOADED (the built-in bulkheads follow it)", MaxMaxInflight)
	f.Choice(&s.Admission, "admission", "mode", "admission limit: fixed (--max-inflight) or adaptive (a latency gradient below --max-inflight; see docs/design.md)", admissionModes)
	f.Int(&s.MaxEventStreams, "max-event-streams", "dashboard event streams served at once; beyond it 503", 0)
	f.String(&s.ConfigFile, "config", "file", "YAML file of per-dependency settings (see config.example.yaml); re-read on SIGHUP")
	f.Addr(&s.AdminAddr, "admin-addr", "listen address of the admin API; empty: off", true)
	f.String(&s.AdminToken, "admin-token", "string", fmt.Sprintf("bearer token the admin API requires (needed with --admin-addr; at least %d bytes)", MinAdminToken))
	f.String(&s.AdminTokenFile, "admin-token-file", "file", "file holding the admin token, trailing newline ignored (keeps it out of the process list)")
	f.Duration(&s.ReadHeaderTimeout, "read-header-timeout", "a client slower than this to send its request headers is disconnected (slowloris)", false)
	f.Duration(&s.ShutdownTimeout, "shutdown-timeout", "bound on the graceful drain after SIGINT/SIGTERM", false)
	f.Choice(&s.LogLevel, "log-level", "level", "log level: "+strings.Join(logLevels, ", "), logLevels)
	allowedHosts(f, &s.AllowedHosts)
	return f
}

func simFlags(s *Sim) *Flags {
	f := NewFlags("sim")
	f.Addr(&s.Addr, "addr", "listen address of the four simulated services and the fault API", false)
	f.Choice(&s.LogLevel, "log-level", "level", "log level: "+strings.Join(logLevels, ", "), logLevels)
	allowedHosts(f, &s.AllowedHosts)
	return f
}

// allowedHosts defines --allowed-hosts, a comma-separated list.
func allowedHosts(f *Flags, p *[]string) {
	f.Func("allowed-hosts", "hosts", "Host names served besides loopback ones on a loopback address, comma-separated; *: any",
		func() string { return strings.Join(*p, ",") },
		func(v string) error {
			*p = nil
			for _, h := range strings.Split(v, ",") {
				if h = strings.TrimSpace(h); h != "" {
					*p = append(*p, h)
				}
			}
			return nil
		})
}

// resolve enforces the rules that tie flags together, fills in the downstream
// URLs from --downstreams-url and reads the admin token file.
func (s *Serve) resolve() error {
	var errs []error
	var all, missing []string
	for _, name := range downstream.Names() {
		all = append(all, "--"+name+"-url")
		if s.URLs[name] == "" {
			missing = append(missing, flagAndEnv(name+"-url"))
		}
	}
	if s.DownstreamsURL != "" {
		urls := SameURL(s.DownstreamsURL)
		for name, u := range s.URLs {
			if u != "" {
				urls[name] = u
			}
		}
		s.URLs = urls
	} else if len(missing) > 0 && len(missing) < len(all) {
		errs = append(errs, fmt.Errorf("set all downstream URLs (%s), or %s for the rest, or none (embedded simulators); missing %s",
			strings.Join(all, ", "), flagAndEnv("downstreams-url"), strings.Join(missing, ", ")))
	}
	errs = append(errs, s.readAdminToken())
	if s.Deadline <= s.Reserve {
		errs = append(errs, fmt.Errorf("%s %s must be longer than %s %s, the time kept back for fallbacks and encoding",
			flagAndEnv("deadline"), formatDuration(s.Deadline), flagAndEnv("reserve"), formatDuration(s.Reserve)))
	}
	return join(errs)
}

// readAdminToken reads the token file, if any, and checks the token. No
// message shows the token.
func (s *Serve) readAdminToken() error {
	from := "admin-token"
	if s.AdminTokenFile != "" {
		if s.AdminToken != "" {
			return fmt.Errorf("%s and %s are exclusive: give the token one way", flagAndEnv("admin-token"), flagAndEnv("admin-token-file"))
		}
		data, err := os.ReadFile(s.AdminTokenFile)
		if err != nil {
			return fmt.Errorf("%s: %w", flagAndEnv("admin-token-file"), err)
		}
		s.AdminToken, from = strings.TrimRight(string(data), "\r\n"), "admin-token-file"
	}
	switch {
	case s.AdminToken != "" && len(s.AdminToken) < MinAdminToken:
		return fmt.Errorf("%s: the token must be at least %d bytes, got %d", flagAndEnv(from), MinAdminToken, len(s.AdminToken))
	case s.AdminAddr != "" && s.AdminToken == "":
		return fmt.Errorf("%s needs %s or %s: the admin API changes live settings and never runs unauthenticated",
			flagAndEnv("admin-addr"), flagAndEnv("admin-token"), flagAndEnv("admin-token-file"))
	}
	return nil
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
	for _, name := range downstream.Names() {
		out[name] = base
	}
	return out
}

// SlogLevel is LogLevel as a slog.Level.
func (s Serve) SlogLevel() slog.Level { return slogLevel(s.LogLevel) }

// LoadDependencies returns the per-dependency settings that s's ConfigFile
// describes, laid over DefaultDependenciesFor(s.MaxInflight) (so a key
// removed from the file returns to its default) and validated against s.Deadline. Without a file it
// returns the defaults. It is what ParseServe runs at start-up and what a
// SIGHUP reload should run: on error, keep the settings in force.
func (s Serve) LoadDependencies() (Dependencies, error) {
	deps := DefaultDependenciesFor(s.MaxInflight)
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
	for _, name := range downstream.Names() {
		attrs = append(attrs, slog.String(name+"_url", redactURL(s.URLs[name])))
	}
	return slog.GroupValue(append(attrs,
		slog.String("downstreams_url", redactURL(s.DownstreamsURL)),
		slog.String("redis_url", redactURL(s.RedisURL)),
		slog.Duration("deadline", s.Deadline),
		slog.Duration("reserve", s.Reserve),
		slog.Int("max_inflight", s.MaxInflight),
		slog.String("admission", s.Admission),
		slog.String("config", s.ConfigFile),
		slog.String("admin_addr", s.AdminAddr),
		slog.String("admin_token", token),
		slog.String("admin_token_file", s.AdminTokenFile),
		slog.Int("max_event_streams", s.MaxEventStreams),
		slog.Duration("read_header_timeout", s.ReadHeaderTimeout),
		slog.Duration("shutdown_timeout", s.ShutdownTimeout),
		slog.String("log_level", s.LogLevel),
		slog.Any("allowed_hosts", s.AllowedHosts),
	)...)
}

// Sim is the configuration of `orderagg sim`.
type Sim struct {
	// Addr serves all four simulated services. Default 127.0.0.1:9100, away
	// from serve's 8080 so both run side by side.
	Addr string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// AllowedHosts is Serve.AllowedHosts for the simulator's listener.
	AllowedHosts []string
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
