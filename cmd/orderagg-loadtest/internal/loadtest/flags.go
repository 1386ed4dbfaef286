package loadtest

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/orderagg/orderagg/internal/config"
)

// Options are the settings of one `orderagg-loadtest` invocation.
type Options struct {
	URL         string
	Rate        float64
	Concurrency int
	Duration    time.Duration
	Warmup      time.Duration
	IDs         int
	MaxRequests int64
	Timeout     time.Duration
	JSON        bool
	AllowRemote bool
	Scenario    string
	Plot        string
	RedisURL    string
	CPUProfile  string

	// set records the flags given on the command line or in the
	// environment, so a scenario keeps its own defaults for the others.
	set map[string]bool
}

// DefaultOptions are the built-in settings, what --help shows.
func DefaultOptions() Options {
	return Options{
		URL:         "http://127.0.0.1:8080",
		Concurrency: 16,
		Duration:    10 * time.Second,
		Warmup:      2 * time.Second,
		IDs:         1000,
		MaxRequests: 1_000_000,
		Timeout:     5 * time.Second,
	}
}

// given reports whether flag name was set explicitly.
func (o Options) given(name string) bool { return o.set[name] }

// errUsage marks a bad command line: exit status 2.
var errUsage = errors.New("usage error")

type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

const envPrefix = "ORDERAGG_"

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// spec is one flag: its name, value hint, help, and how to set its field
// from a string (the same code for the command line and the environment, so
// errors read the same).
type spec struct {
	name, typ, help string
	isBool          bool
	def             func(Options) string
	set             func(*Options, string) error
}

func specs() []spec {
	dur := func(get func(*Options) *time.Duration, allowZero bool) func(*Options, string) error {
		return func(o *Options, s string) error {
			d, err := time.ParseDuration(s)
			if err != nil {
				return errors.New("not a duration (e.g. 10s, 500ms)")
			}
			if d < 0 || (d == 0 && !allowZero) {
				if allowZero {
					return errors.New("must not be negative")
				}
				return errors.New("must be positive")
			}
			*get(o) = d
			return nil
		}
	}
	posInt := func(get func(*Options) *int64) func(*Options, string) error {
		return func(o *Options, s string) error {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return errors.New("not an integer")
			}
			if n < 1 {
				return errors.New("must be at least 1")
			}
			*get(o) = n
			return nil
		}
	}
	boolean := func(get func(*Options) *bool) func(*Options, string) error {
		return func(o *Options, s string) error {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return errors.New("not a boolean (true or false)")
			}
			*get(o) = b
			return nil
		}
	}
	return []spec{
		{name: "url", typ: "URL", help: "base URL of the orderagg service under test (loopback only unless --allow-remote)",
			def: func(o Options) string { return o.URL },
			set: func(o *Options, s string) error {
				u, err := url.Parse(s)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return errors.New("want an http:// or https:// URL with a host")
				}
				if u.RawQuery != "" || u.Fragment != "" {
					return errors.New("must not have a query or fragment")
				}
				o.URL = s
				return nil
			}},
		{name: "rate", typ: "req/s", help: "open loop: requests per second, sent on schedule whatever the answers; 0: closed loop of --concurrency workers",
			def: func(o Options) string { return strconv.FormatFloat(o.Rate, 'g', -1, 64) },
			set: func(o *Options, s string) error {
				r, err := strconv.ParseFloat(s, 64)
				if err != nil || math.IsNaN(r) {
					return errors.New("not a number")
				}
				if r < 0 || r > 1e6 {
					return errors.New("must be 0..1000000")
				}
				o.Rate = r
				return nil
			}},
		{name: "concurrency", typ: "int", help: "closed loop: workers, each sending its next request when the last is answered",
			def: func(o Options) string { return strconv.Itoa(o.Concurrency) },
			set: func(o *Options, s string) error {
				var n int64
				if err := posInt(func(*Options) *int64 { return &n })(o, s); err != nil {
					return err
				}
				if n > 100_000 {
					return errors.New("must be at most 100000")
				}
				o.Concurrency = int(n)
				return nil
			}},
		{name: "duration", typ: "duration", help: "measured time, after the warm-up (per step with --scenario)",
			def: func(o Options) string { return o.Duration.String() },
			set: dur(func(o *Options) *time.Duration { return &o.Duration }, false)},
		{name: "warmup", typ: "duration", help: "load sent first and left out of every figure (per step with --scenario)",
			def: func(o Options) string { return o.Warmup.String() },
			set: dur(func(o *Options) *time.Duration { return &o.Warmup }, true)},
		{name: "ids", typ: "int", help: "spread of order ids: requests cycle through o-1 … o-N",
			def: func(o Options) string { return strconv.Itoa(o.IDs) },
			set: func(o *Options, s string) error {
				var n int64
				if err := posInt(func(*Options) *int64 { return &n })(o, s); err != nil {
					return err
				}
				if n > 1_000_000_000 {
					return errors.New("must be at most 1000000000")
				}
				o.IDs = int(n)
				return nil
			}},
		{name: "max-requests", typ: "int", help: "stop after this many measured requests, even before --duration is up",
			def: func(o Options) string { return strconv.FormatInt(o.MaxRequests, 10) },
			set: posInt(func(o *Options) *int64 { return &o.MaxRequests })},
		{name: "timeout", typ: "duration", help: "per-request timeout; a request that times out counts as an error",
			def: func(o Options) string { return o.Timeout.String() },
			set: dur(func(o *Options) *time.Duration { return &o.Timeout }, false)},
		{name: "json", typ: "", isBool: true, help: "print the summary as one JSON object",
			def: func(o Options) string { return strconv.FormatBool(o.JSON) },
			set: boolean(func(o *Options) *bool { return &o.JSON })},
		{name: "allow-remote", typ: "", isBool: true, help: "allow a --url that is not a loopback address",
			def: func(o Options) string { return strconv.FormatBool(o.AllowRemote) },
			set: boolean(func(o *Options) *bool { return &o.AllowRemote })},
		{name: "scenario", typ: "name", help: "run an in-process experiment instead of loading --url: " + strings.Join(scenarioNames(), ", "),
			def: func(o Options) string { return o.Scenario },
			set: func(o *Options, s string) error {
				if _, ok := findScenario(s); !ok {
					return fmt.Errorf("unknown scenario; want one of %s", strings.Join(scenarioNames(), ", "))
				}
				o.Scenario = s
				return nil
			}},
		{name: "plot", typ: "dir", help: "with --scenario: write the experiment's SVG charts into this directory",
			def: func(o Options) string { return o.Plot },
			set: func(o *Options, s string) error { o.Plot = s; return nil }},
		{name: "cpuprofile", typ: "file", help: "with --scenario: write a CPU profile of the whole experiment (load, simulator and aggregators share the process) for go tool pprof",
			def: func(o Options) string { return o.CPUProfile },
			set: func(o *Options, s string) error { o.CPUProfile = s; return nil }},
		{name: "redis-url", typ: "URL", help: "with --scenario: the last-good cache of the in-process orderagg; empty: a redis-server child process when one is on PATH, else embedded",
			def: func(o Options) string { return o.RedisURL },
			set: func(o *Options, s string) error {
				u, err := url.Parse(s)
				if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
					return errors.New("want a redis:// or rediss:// URL with a host")
				}
				o.RedisURL = s
				return nil
			}},
	}
}

// rawBool collects a boolean flag's text so that "--json" alone means true
// and the value is parsed by the same code as the environment's.
type rawBool struct{ v *string }

func (b rawBool) String() string {
	if b.v == nil {
		return ""
	}
	return *b.v
}
func (b rawBool) Set(s string) error { *b.v = s; return nil }
func (b rawBool) IsBoolFlag() bool   { return true }

// parseOptions reads the command line, then the environment twins of the
// flags not on it. --help returns flag.ErrHelp; every other error matches
// errUsage and is one line naming the flag.
func parseOptions(args []string, getenv func(string) string) (Options, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	o := DefaultOptions()
	o.set = map[string]bool{}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	all := specs()
	raw := make(map[string]*string, len(all))
	for _, sp := range all {
		v := new(string)
		raw[sp.name] = v
		if sp.isBool {
			fs.Var(rawBool{v}, sp.name, sp.help)
		} else {
			fs.StringVar(v, sp.name, "", sp.help)
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Options{}, flag.ErrHelp
		}
		return Options{}, usagef("%v (see --help)", err)
	}
	if fs.NArg() > 0 {
		return Options{}, usagef("unexpected argument %q (see --help)", fs.Arg(0))
	}
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	for _, sp := range all {
		var v string
		switch env := envName(sp.name); {
		case onCommandLine[sp.name]:
			v = *raw[sp.name]
		case getenv(env) != "":
			v = getenv(env)
		default:
			continue
		}
		if err := sp.set(&o, v); err != nil {
			return Options{}, usagef("invalid value %q for --%s (%s): %v", v, sp.name, envName(sp.name), err)
		}
		o.set[sp.name] = true
	}
	if o.Plot != "" && o.Scenario == "" {
		return Options{}, usagef("--plot (%s) needs --scenario: only the experiments draw charts", envName("plot"))
	}
	if o.CPUProfile != "" && o.Scenario == "" {
		return Options{}, usagef("--cpuprofile (%s) needs --scenario: profile your own deployment with its own tools", envName("cpuprofile"))
	}
	if o.RedisURL != "" && o.Scenario == "" {
		return Options{}, usagef("--redis-url (%s) needs --scenario: it configures the experiments' in-process orderagg", envName("redis-url"))
	}
	return o, nil
}

// Table lists the flags in --help order with their defaults, in the form
// config.MarkdownTable renders, so the README's table can be generated and
// kept in sync like serve's and sim's.
func Table() []config.FlagDoc {
	def := DefaultOptions()
	var out []config.FlagDoc
	for _, sp := range specs() {
		typ := sp.typ
		if sp.isBool {
			typ = "bool"
		}
		out = append(out, config.FlagDoc{Name: "--" + sp.name, Env: envName(sp.name), Type: typ, Default: sp.def(def), Help: sp.help})
	}
	return out
}

// usage writes --help: every flag with its environment twin and default.
func usage(w io.Writer) {
	def := DefaultOptions()
	fmt.Fprintf(w, `Usage: orderagg-loadtest [flags]

Drives load at a running orderagg and prints throughput, latency
percentiles, the HTTP status mix, the share of degraded pages and, per
section, how many answers were live, cached or fallbacks. With --scenario it
instead runs one of the experiments of docs/experiments.md in-process.

Every flag can also be set by its environment variable; the flag wins.

Flags:
`)
	for _, sp := range specs() {
		d := sp.def(def)
		if d == "" {
			d = "empty"
		}
		typ := sp.typ
		if typ != "" {
			typ = " " + typ
		}
		fmt.Fprintf(w, "  --%s%s  (%s, default %s)\n    \t%s\n", sp.name, typ, envName(sp.name), d, sp.help)
	}
}
