// Package config reads orderagg's configuration into typed structs whose
// defaults are in one place (DefaultServe, DefaultSim, DefaultDependencies):
// flags and their ORDERAGG_* environment twins, parsed by ff (a flag wins),
// and the --config YAML file of per-dependency settings, decoded strictly by
// yaml.v3. Every error of a bad value is one line naming the flag, or the
// file's line, and matches ErrUsage.
package config

//go:generate go test -run TestExampleFile|TestREADMEConfigTables -update .

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3"

	"github.com/orderagg/orderagg/internal/downstream"
)

// ErrUsage matches every error of a bad command line, environment or
// --config file (exit status 2); --help returns flag.ErrHelp (exit 0).
var ErrUsage = errors.New("config: usage error")

// EnvPrefix starts every flag's environment twin: --order-url is ORDERAGG_ORDER_URL.
const EnvPrefix = "ORDERAGG_"

// --max-inflight's default and maximum (the bulkheads are multiples of it),
// and the shortest admin token, in bytes.
const DefaultMaxInflight, MaxMaxInflight, MinAdminToken = 1024, 1 << 20, 16

// Serve is the configuration of `orderagg serve`; ServeFlags' help says
// what each field means.
type Serve struct {
	Addr string
	// URLs are the downstreams' base URLs by registered name, empty ones
	// filled from DownstreamsURL; all empty: the simulators run in-process.
	URLs                     map[string]string
	DownstreamsURL, RedisURL string
	Deadline, Reserve        time.Duration // the page's calls end at Deadline − Reserve
	MaxInflight              int
	ConfigFile               string
	// AdminAddr (empty: off) needs AdminToken, read from AdminTokenFile if set.
	AdminAddr, AdminToken, AdminTokenFile string
	AllowedHosts, TrustedProxies          []string
	MaxEventStreams                       int
	ReadHeaderTimeout, ShutdownTimeout    time.Duration
	LogLevel                              slog.Level
	// Dependencies are DefaultDependenciesFor(MaxInflight) with the --config file laid over.
	Dependencies Dependencies
}

// DefaultServe returns serve's built-in configuration: loopback, so a demo
// is not exposed (the image sets :8080); a reserve for two last-good reads.
func DefaultServe() Serve {
	return Serve{
		Addr:              "127.0.0.1:8080",
		URLs:              map[string]string{},
		Deadline:          1500 * time.Millisecond,
		Reserve:           100 * time.Millisecond,
		MaxInflight:       DefaultMaxInflight,
		MaxEventStreams:   100,
		ReadHeaderTimeout: 5 * time.Second,
		ShutdownTimeout:   10 * time.Second,
		Dependencies:      DefaultDependencies(),
	}
}

// Sim is the configuration of `orderagg sim`, set by SimFlags.
type Sim struct {
	Addr         string
	AllowedHosts []string
	LogLevel     slog.Level
}

// DefaultSim returns sim's built-in configuration.
func DefaultSim() Sim { return Sim{Addr: "127.0.0.1:9100"} }

// ServeFlags defines serve's flags on a new flag set, bound to s.
func ServeFlags(s *Serve) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&s.Addr, "addr", s.Addr, "listen address of the order-detail API")
	for _, name := range downstream.Names() {
		fs.Func(name+"-url", "base `URL` of the "+name+" service; empty: --downstreams-url", func(v string) error { s.URLs[name] = v; return nil })
	}
	fs.StringVar(&s.DownstreamsURL, "downstreams-url", s.DownstreamsURL, "base `URL` of every downstream without its own --NAME-url; all empty: embedded simulators")
	fs.StringVar(&s.RedisURL, "redis-url", s.RedisURL, "redis:// or rediss:// `URL` of the last-good cache; empty: embedded, not durable")
	fs.DurationVar(&s.Deadline, "deadline", s.Deadline, "total budget of one order-detail request")
	fs.DurationVar(&s.Reserve, "reserve", s.Reserve, "part of the deadline kept back for fallbacks, assembly and encoding; longer than the cache's timeout")
	fs.IntVar(&s.MaxInflight, "max-inflight", s.MaxInflight, "order-detail requests served at once; beyond it an immediate 503 OVERLOADED")
	fs.StringVar(&s.ConfigFile, "config", s.ConfigFile, "YAML `file` of per-dependency settings (see config.example.yaml); re-read on SIGHUP")
	fs.StringVar(&s.AdminAddr, "admin-addr", s.AdminAddr, "listen address of the admin API; empty: off")
	fs.StringVar(&s.AdminToken, "admin-token", s.AdminToken, fmt.Sprintf("bearer token the admin API requires (at least %d bytes)", MinAdminToken))
	fs.StringVar(&s.AdminTokenFile, "admin-token-file", s.AdminTokenFile, "`file` holding the admin token (keeps it out of the process list)")
	fs.Func("allowed-hosts", allowedHostsHelp, listOf(&s.AllowedHosts, "host names or *", isHost))
	fs.Func("trusted-proxies", "`addresses` or CIDR prefixes whose X-Forwarded-For is believed, comma-separated; empty: none",
		listOf(&s.TrustedProxies, "IP addresses or CIDR prefixes", isIPOrPrefix))
	fs.IntVar(&s.MaxEventStreams, "max-event-streams", s.MaxEventStreams, "dashboard event streams served at once; beyond it 503")
	fs.DurationVar(&s.ReadHeaderTimeout, "read-header-timeout", s.ReadHeaderTimeout, "a client slower than this to send its headers is disconnected")
	fs.DurationVar(&s.ShutdownTimeout, "shutdown-timeout", s.ShutdownTimeout, "bound on the graceful drain after SIGINT/SIGTERM")
	fs.TextVar(&s.LogLevel, "log-level", s.LogLevel, logLevelHelp)
	return fs
}

// SimFlags defines sim's flags on a new flag set, bound to s.
func SimFlags(s *Sim) *flag.FlagSet {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.StringVar(&s.Addr, "addr", s.Addr, "listen address of the simulated services and the fault API")
	fs.Func("allowed-hosts", allowedHostsHelp, listOf(&s.AllowedHosts, "host names or *", isHost))
	fs.TextVar(&s.LogLevel, "log-level", s.LogLevel, logLevelHelp)
	return fs
}

const (
	allowedHostsHelp = "`hosts` served besides loopback ones on a loopback address, comma-separated; *: any (see internal/handlers/hostguard.go)"
	logLevelHelp     = "log `level`: debug, info, warn or error"
)

// ServeUsage writes serve's --help.
func ServeUsage(w io.Writer) {
	s := DefaultServe()
	PrintUsage(w, ServeFlags(&s), EnvPrefix, "orderagg serve [flags]", "Runs the order-detail service (the default command).")
}

// SimUsage writes sim's --help.
func SimUsage(w io.Writer) {
	s := DefaultSim()
	PrintUsage(w, SimFlags(&s), EnvPrefix, "orderagg sim [flags]", "Runs the four simulated downstream services, with fault injection.")
}

// ParseServe reads serve's configuration from args (after the sub-command)
// and the ORDERAGG_* environment, checks it, and loads the --config file.
func ParseServe(args []string) (Serve, error) { return parseServe(args, true) }

// ParseServeArgs is ParseServe without the environment, for in-process
// services (tests, the load tool).
func ParseServeArgs(args []string) (Serve, error) { return parseServe(args, false) }

func parseServe(args []string, env bool) (Serve, error) {
	s := DefaultServe()
	if err := Parse(ServeFlags(&s), args, EnvPrefix, env); err != nil {
		return Serve{}, err
	}
	err := s.check()
	if err == nil {
		s.Dependencies, err = s.LoadDependencies()
	}
	if err != nil {
		return Serve{}, usageError{err}
	}
	return s, nil
}

// ParseSim is ParseServe for `orderagg sim`.
func ParseSim(args []string) (Sim, error) {
	s := DefaultSim()
	if err := Parse(SimFlags(&s), args, EnvPrefix, true); err != nil {
		return Sim{}, err
	}
	if err := named("addr", checkAddr(s.Addr, false)); err != nil {
		return Sim{}, usageError{err}
	}
	return s, nil
}

// Parse parses args into fs with ff and, when env is set, the environment
// twins (EnvName) of the flags args leave out. --help returns flag.ErrHelp;
// every other error matches ErrUsage, is one line naming the flag and its
// variable, and hides passwords.
func Parse(fs *flag.FlagSet, args []string, prefix string, env bool) error {
	fs.SetOutput(io.Discard) // the caller prints the error or the usage
	var opts []ff.Option
	if env {
		opts = append(opts, ff.WithEnvVarPrefix(strings.TrimSuffix(prefix, "_")))
	}
	switch err := ff.Parse(fs, args, opts...); {
	case errors.Is(err, flag.ErrHelp):
		return flag.ErrHelp
	case err != nil: // without ff's "error parsing …"
		msg := redact(errors.Unwrap(err).Error())
		if m := badValue.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("--%s (%s): %s", m[1]+m[2], EnvName(prefix, m[1]+m[2]), msg)
		}
		return usageError{errors.New(msg)}
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("unexpected argument %q (see --help)", redact(fs.Arg(0)))}
	}
	return nil
}

// badValue finds the flag in ff's and the flag package's errors of a value refused.
var badValue = regexp.MustCompile(`for (?:flag )?-([\w-]+)|flag "([\w-]+)"`)

// PrintUsage writes a command's --help: its usage line, what it does, and
// every flag with its type, environment variable and default.
func PrintUsage(w io.Writer, fs *flag.FlagSet, prefix, usageLine, what string) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\nEvery flag can also be set by its environment variable; the flag wins.\n\nFlags:\n", usageLine, what)
	fs.VisitAll(func(f *flag.Flag) {
		typ, help := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s %s  (%s, default %s)\n    \t%s\n", f.Name, typ, EnvName(prefix, f.Name), cmp.Or(f.DefValue, "empty"), help)
	})
}

// EnvName is the environment twin of the flag called name, as ff reads it.
func EnvName(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// check returns the first bad value, having filled the empty downstream URLs
// from --downstreams-url and read the admin token file.
func (s *Serve) check() error {
	errs := []error{named("downstreams-url", CheckURL(s.DownstreamsURL, webSchemes, false))}
	var missing []string
	for _, name := range downstream.Names() {
		errs = append(errs, named(name+"-url", CheckURL(s.URLs[name], webSchemes, false)))
		if s.URLs[name] == "" {
			missing = append(missing, "--"+name+"-url")
			if s.DownstreamsURL != "" {
				s.URLs[name] = s.DownstreamsURL
			}
		}
	}
	if s.DownstreamsURL == "" && len(missing) > 0 && len(missing) < len(downstream.Names()) {
		errs = append(errs, fmt.Errorf("set every downstream URL, or --downstreams-url (%s) for the rest, or none (embedded simulators); missing %s",
			EnvName(EnvPrefix, "downstreams-url"), strings.Join(missing, ", ")))
	}
	return cmp.Or(append(errs,
		named("addr", checkAddr(s.Addr, false)),
		named("admin-addr", checkAddr(s.AdminAddr, true)),
		named("redis-url", CheckURL(s.RedisURL, []string{"redis", "rediss"}, true)),
		named("deadline", positive(s.Deadline)),
		named("reserve", positive(s.Reserve)),
		named("max-inflight", positive(s.MaxInflight)),
		named("max-inflight", positive(MaxMaxInflight+1-s.MaxInflight)), // at most MaxMaxInflight
		named("max-event-streams", positive(s.MaxEventStreams)),
		named("read-header-timeout", positive(s.ReadHeaderTimeout)),
		named("shutdown-timeout", positive(s.ShutdownTimeout)),
		s.readAdminToken())...)
}

// readAdminToken reads the token file, if any, and checks the token without showing it.
func (s *Serve) readAdminToken() error {
	from := "admin-token"
	if s.AdminTokenFile != "" {
		if s.AdminToken != "" {
			return named("admin-token-file", errors.New("exclusive with --admin-token: give the token one way"))
		}
		data, err := os.ReadFile(s.AdminTokenFile)
		if err != nil {
			return named("admin-token-file", err)
		}
		s.AdminToken, from = strings.TrimRight(string(data), "\r\n"), "admin-token-file"
	}
	switch {
	case s.AdminToken != "" && len(s.AdminToken) < MinAdminToken:
		return named(from, fmt.Errorf("the token must be at least %d bytes, got %d", MinAdminToken, len(s.AdminToken)))
	case s.AdminAddr != "" && s.AdminToken == "":
		return named("admin-addr", errors.New("needs --admin-token or --admin-token-file: the admin API changes live settings"))
	}
	return nil
}

// Bounds are the page's limits that the per-dependency settings must fit.
func (s Serve) Bounds() Bounds { return Bounds{Deadline: s.Deadline, Reserve: s.Reserve} }

// LoadDependencies returns the ConfigFile's settings (none: no file) laid
// over DefaultDependenciesFor(MaxInflight), validated against Bounds: what
// start-up and SIGHUP put in force.
func (s Serve) LoadDependencies() (Dependencies, error) {
	deps := DefaultDependenciesFor(s.MaxInflight)
	if s.ConfigFile == "" {
		return deps, deps.Validate(s.Bounds())
	}
	data, err := os.ReadFile(s.ConfigFile)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	if deps, err = deps.lay(data, s.Bounds()); err != nil {
		return nil, fmt.Errorf("config file %s: %w", s.ConfigFile, err)
	}
	return deps, nil
}

// EmbeddedDownstreams reports whether no downstream URL is set: the simulators run in-process.
func (s Serve) EmbeddedDownstreams() bool {
	return !slices.ContainsFunc(downstream.Names(), func(n string) bool { return s.URLs[n] != "" })
}

// SameURL returns URLs with every registered downstream at base.
func SameURL(base string) map[string]string {
	out := map[string]string{}
	for _, name := range downstream.Names() {
		out[name] = base
	}
	return out
}

var webSchemes = []string{"http", "https"}

// listOf sets a comma-separated flag's entries in *l, refusing one not ok.
func listOf(l *[]string, want string, ok func(string) bool) func(string) error {
	return func(v string) error {
		*l = strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
		if i := slices.IndexFunc(*l, func(e string) bool { return !ok(e) }); i >= 0 {
			return fmt.Errorf("want %s, got %q", want, (*l)[i])
		}
		return nil
	}
}

func isHost(h string) bool { return h == "*" || !strings.ContainsAny(h, "*/@") }

func isIPOrPrefix(p string) bool {
	_, errPrefix := netip.ParsePrefix(p)
	_, errAddr := netip.ParseAddr(p)
	return errPrefix == nil || errAddr == nil
}

// named puts the flag and its variable in front of err; nil stays nil.
func named(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("--%s (%s): %w", name, EnvName(EnvPrefix, name), err)
}

// usageError marks err as ErrUsage without changing its message.
type usageError struct{ error }

func (e usageError) Unwrap() error        { return e.error }
func (e usageError) Is(target error) bool { return target == ErrUsage }

func positive[T int | time.Duration](v T) error {
	if v <= 0 {
		return fmt.Errorf("must be positive, got %v", v)
	}
	return nil
}

// checkAddr accepts host:port with a port 0..65535, and "" when optional.
func checkAddr(s string, optional bool) error {
	_, port, err := net.SplitHostPort(s)
	if _, perr := strconv.ParseUint(port, 10, 16); (err != nil || perr != nil) && (s != "" || !optional) {
		return fmt.Errorf("want host:port with a port 0..65535, got %q", s)
	}
	return nil
}

// userinfo runs to a word's last '@', so a password holding '/', '#' or '@' is hidden whole.
var userinfo, password = regexp.MustCompile(`://\S*@`), regexp.MustCompile(`(?i)(password=)[^&#\s]*`)

// redact hides the passwords of anything URL-like in s.
func redact(s string) string {
	return password.ReplaceAllString(userinfo.ReplaceAllString(s, "://xxxxx@"), "${1}xxxxx")
}

// CheckURL accepts empty, or an absolute URL with one of schemes, a host, no
// fragment, and no query unless query is set. Its errors never repeat s.
func CheckURL(s string, schemes []string, query bool) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return errors.New("not a valid URL")
	case !slices.Contains(schemes, u.Scheme):
		return fmt.Errorf("scheme must be %s", strings.Join(schemes, " or "))
	case u.Hostname() == "":
		return errors.New("missing host")
	case u.Fragment != "" || u.RawQuery != "" && !query:
		return errors.New("a base URL takes no query or fragment")
	}
	return nil
}
