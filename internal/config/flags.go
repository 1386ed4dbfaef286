package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orderagg/orderagg/internal/cache"
	"github.com/orderagg/orderagg/internal/registry"
)

// EnvPrefix starts the environment twin of every flag: --order-url is
// ORDERAGG_ORDER_URL.
const EnvPrefix = "ORDERAGG_"

// envName is the environment twin of the flag called name (without dashes).
func envName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// FlagDoc describes one flag for --help, the README and its sync test.
type FlagDoc struct {
	Name    string // "--addr"
	Env     string // "ORDERAGG_ADDR"
	Type    string // what the value looks like: duration, URL, host:port, …
	Default string // as written on the command line; "" when empty
	Help    string
}

// ServeTable lists serve's flags in --help order, with their defaults.
func ServeTable() []FlagDoc {
	s := DefaultServe()
	return table(serveFlags(&s))
}

// SimTable lists sim's flags in --help order, with their defaults.
func SimTable() []FlagDoc {
	s := DefaultSim()
	return table(simFlags(&s))
}

// ServeUsage writes serve's --help text: every flag with its environment
// variable and default.
func ServeUsage(w io.Writer) {
	writeUsage(w, "serve", "Runs the order-detail service.", ServeTable())
}

// SimUsage writes sim's --help text.
func SimUsage(w io.Writer) {
	writeUsage(w, "sim", "Runs the four simulated downstream services, with fault injection.", SimTable())
}

// ParseServe reads serve's configuration from args (the arguments after the
// sub-command) and getenv (os.Getenv in production; nil means an empty
// environment; an empty variable counts as unset), then loads the --config
// file if one is given. Flags win over the environment, the environment over
// the defaults.
//
// --help or -h returns flag.ErrHelp (print ServeUsage, exit 0). Every other
// error is one line naming the flag and its variable, or the file key, and
// matches ErrUsage (exit 2).
func ParseServe(args []string, getenv func(string) string) (Serve, error) {
	s := DefaultServe()
	if err := parse("serve", serveFlags(&s), args, getenv); err != nil {
		return Serve{}, err
	}
	if err := s.check(); err != nil {
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
func ParseSim(args []string, getenv func(string) string) (Sim, error) {
	s := DefaultSim()
	if err := parse("sim", simFlags(&s), args, getenv); err != nil {
		return Sim{}, err
	}
	return s, nil
}

// check enforces the rules that tie flags together; each flag's own value
// was checked as it was set.
func (s Serve) check() error {
	var errs []error
	var all, missing []string
	for _, name := range registry.Names() {
		all = append(all, "--"+name+"-url")
		if s.URLs[name] == "" {
			missing = append(missing, flagAndEnv(name+"-url"))
		}
	}
	if len(missing) > 0 && len(missing) < len(all) {
		errs = append(errs, fmt.Errorf("set all downstream URLs (%s) or none (embedded simulators); missing %s",
			strings.Join(all, ", "), strings.Join(missing, ", ")))
	}
	if s.AdminAddr != "" && s.AdminToken == "" {
		errs = append(errs, fmt.Errorf("%s needs %s: the admin API changes live settings and never runs unauthenticated",
			flagAndEnv("admin-addr"), flagAndEnv("admin-token")))
	}
	if s.Deadline <= s.Reserve {
		errs = append(errs, fmt.Errorf("%s %s must be longer than %s %s, the time kept back for fallbacks and encoding",
			flagAndEnv("deadline"), formatDuration(s.Deadline), flagAndEnv("reserve"), formatDuration(s.Reserve)))
	}
	return join(errs)
}

func flagAndEnv(name string) string {
	return fmt.Sprintf("--%s (%s)", name, envName(name))
}

// flagSpec is one flag: its name, its documentation and the field it sets.
type flagSpec struct {
	name  string // without dashes
	typ   string // value hint for --help
	help  string
	value value
}

// value is a flag's binding to its field: set parses and checks a string
// into the field, String formats the field as a command line would.
type value interface {
	set(string) error
	String() string
}

func serveFlags(s *Serve) []flagSpec {
	specs := []flagSpec{{"addr", "host:port", "listen address of the order-detail API", addrValue{p: &s.Addr}}}
	// One --NAME-url per registered downstream. The map is replaced, not
	// changed, so a copy of the defaults is never written through.
	s.URLs = maps.Clone(s.URLs)
	if s.URLs == nil {
		s.URLs = map[string]string{}
	}
	for _, name := range registry.Names() {
		specs = append(specs, flagSpec{name + "-url", "URL", "base URL of the " + name + " service; all empty: embedded simulators",
			urlValue{store: func(v string) { s.URLs[name] = v }, load: func() string { return s.URLs[name] }, schemes: []string{"http", "https"}}})
	}
	return append(specs, []flagSpec{
		{"redis-url", "URL", "redis:// or rediss:// URL of the last-good cache; empty: embedded, not durable", urlValue{store: func(v string) { s.RedisURL = v }, load: func() string { return s.RedisURL }, schemes: []string{"redis", "rediss"}, query: true}},
		{"deadline", "duration", "total budget of one order-detail request", durationValue{&s.Deadline}},
		{"reserve", "duration", "part of the deadline kept back for fallbacks, assembly and encoding", durationValue{&s.Reserve}},
		{"max-inflight", "int", "order-detail requests served at once; beyond it an immediate 503 OVERLOADED", intValue{&s.MaxInflight}},
		{"max-event-streams", "int", "dashboard event streams open at once; beyond it 503 TOO_MANY_STREAMS", intValue{&s.MaxEventStreams}},
		{"admission", "mode", "admission limit: fixed (--max-inflight) or adaptive (a latency gradient below --max-inflight; see docs/design.md)", choiceValue{&s.Admission, admissionModes}},
		{"config", "file", "YAML file of per-dependency settings (see config.example.yaml); re-read on SIGHUP", stringValue{&s.ConfigFile}},
		{"admin-addr", "host:port", "listen address of the admin API; empty: off", addrValue{p: &s.AdminAddr, optional: true}},
		{"admin-token", "string", "bearer token the admin API requires (needed with --admin-addr)", stringValue{&s.AdminToken}},
		{"read-header-timeout", "duration", "a client slower than this to send its request headers is disconnected (slowloris)", durationValue{&s.ReadHeaderTimeout}},
		{"shutdown-timeout", "duration", "bound on the graceful drain after SIGINT/SIGTERM", durationValue{&s.ShutdownTimeout}},
		{"log-level", "level", "log level: " + strings.Join(logLevels, ", "), levelValue(&s.LogLevel)},
	}...)
}

func simFlags(s *Sim) []flagSpec {
	return []flagSpec{
		{"addr", "host:port", "listen address of the four simulated services and the fault API", addrValue{p: &s.Addr}},
		{"log-level", "level", "log level: " + strings.Join(logLevels, ", "), levelValue(&s.LogLevel)},
	}
}

// admissionModes are the values --admission accepts.
var admissionModes = []string{AdmissionFixed, AdmissionAdaptive}

// parse sets the fields behind specs from args, then the environment. The
// flag package only collects raw strings; every value, wherever it came
// from, is then parsed by the same code, so errors read the same and name
// both the flag and its variable.
func parse(cmd string, specs []flagSpec, args []string, getenv func(string) string) error {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the caller prints the one-line error or the usage
	fs.Usage = func() {}
	raw := make(map[string]*string, len(specs))
	for _, sp := range specs {
		raw[sp.name] = fs.String(sp.name, "", sp.help)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return usage(fmt.Errorf("%w (see --help)", err))
	}
	if fs.NArg() > 0 {
		return usage(fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0)))
	}
	onCommandLine := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	for _, sp := range specs {
		env := envName(sp.name)
		var v string
		switch {
		case onCommandLine[sp.name]:
			v = *raw[sp.name]
		case getenv(env) != "":
			v = getenv(env)
		default:
			continue
		}
		if err := sp.value.set(v); err != nil {
			if _, isURL := sp.value.(urlValue); isURL {
				v = cache.RedactURL(v) // never echo a password
			}
			return usage(fmt.Errorf("invalid value %q for --%s (%s): %w", v, sp.name, env, err))
		}
	}
	return nil
}

func table(specs []flagSpec) []FlagDoc {
	out := make([]FlagDoc, len(specs))
	for i, sp := range specs {
		out[i] = FlagDoc{Name: "--" + sp.name, Env: envName(sp.name), Type: sp.typ, Default: sp.value.String(), Help: sp.help}
	}
	return out
}

func writeUsage(w io.Writer, cmd, what string, flags []FlagDoc) {
	fmt.Fprintf(w, "Usage: orderagg %s [flags]\n\n%s\n", cmd, what)
	fmt.Fprintf(w, "Every flag can also be set by its environment variable; the flag wins.\n\nFlags:\n")
	for _, f := range flags {
		def := f.Default
		if def == "" {
			def = "empty"
		}
		fmt.Fprintf(w, "  %s %s  (%s, default %s)\n    \t%s\n", f.Name, f.Type, f.Env, def, f.Help)
	}
}

// MarkdownTable renders flags as a Markdown table (flag, environment
// variable, default, meaning) for the README, so a test can keep the README
// in sync with the code.
func MarkdownTable(flags []FlagDoc) string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	for _, f := range flags {
		def := "empty"
		if f.Default != "" {
			def = "`" + f.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", f.Name, f.Env, def, strings.ReplaceAll(f.Help, "|", `\|`))
	}
	return b.String()
}

type stringValue struct{ p *string }

func (v stringValue) set(s string) error { *v.p = s; return nil }
func (v stringValue) String() string     { return *v.p }

// addrValue is a listen address, host:port with a numeric port (0 picks a
// free one). optional allows empty, meaning "off".
type addrValue struct {
	p        *string
	optional bool
}

func (v addrValue) set(s string) error {
	if s == "" && v.optional {
		*v.p = s
		return nil
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port must be a number 0..65535, got %q", port)
	}
	*v.p = s
	return nil
}

func (v addrValue) String() string { return *v.p }

// urlValue is an optional base URL: empty, or an absolute URL with one of
// schemes and a host, and no query or fragment (paths are appended to it).
type urlValue struct {
	store   func(string)
	load    func() string
	schemes []string
	// query allows a query string: --redis-url takes addr=, cluster=,
	// master_name= and go-redis options there (internal/cache checks them).
	query bool
}

func (v urlValue) set(s string) error {
	if s == "" {
		v.store(s)
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if !slices.Contains(v.schemes, u.Scheme) {
		return fmt.Errorf("scheme must be %s", strings.Join(v.schemes, " or "))
	}
	if u.Hostname() == "" {
		return errors.New("missing host")
	}
	if u.Fragment != "" || (u.RawQuery != "" && !v.query) {
		return errors.New("a base URL takes no query or fragment")
	}
	v.store(s)
	return nil
}

func (v urlValue) String() string { return v.load() }

// durationValue is a positive duration such as 1500ms.
type durationValue struct{ p *time.Duration }

func (v durationValue) set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("must be positive, got %s", formatDuration(d))
	}
	*v.p = d
	return nil
}

func (v durationValue) String() string { return formatDuration(*v.p) }

// intValue is a positive whole number.
type intValue struct{ p *int }

func (v intValue) set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) {
			err = ne.Err
		}
		return fmt.Errorf("must be a whole number: %w", err)
	}
	if n <= 0 {
		return fmt.Errorf("must be positive, got %d", n)
	}
	*v.p = n
	return nil
}

func (v intValue) String() string { return strconv.Itoa(*v.p) }

// choiceValue is one of choices, case-insensitive, stored in lower case.
type choiceValue struct {
	p       *string
	choices []string
}

func (v choiceValue) set(s string) error {
	l := strings.ToLower(s)
	if !slices.Contains(v.choices, l) {
		return fmt.Errorf("want one of %s", strings.Join(v.choices, ", "))
	}
	*v.p = l
	return nil
}

func (v choiceValue) String() string { return *v.p }

// levelValue is a --log-level.
func levelValue(p *string) choiceValue { return choiceValue{p, logLevels} }
