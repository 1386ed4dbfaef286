package loadtest

import (
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
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
	MemProfile  string

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

func usagef(format string, args ...any) error {
	return &lineError{fmt.Sprintf(format, args...)}
}

// lineError breaks one of this command's own rules: exit status 2, like
// every flag error (config.ErrUsage).
type lineError struct{ msg string }

func (e *lineError) Error() string        { return e.msg }
func (e *lineError) Is(target error) bool { return target == config.ErrUsage }

func envName(flagName string) string {
	return config.EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// flags defines the command's flags on o (parsed by config.Parse: the
// command line, then the ORDERAGG_* twins).
func flags(o *Options) *flag.FlagSet {
	fs := flag.NewFlagSet("orderagg-loadtest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.URL, "url", o.URL, "base `URL` of the orderagg service under test (loopback only unless --allow-remote)")
	fs.Float64Var(&o.Rate, "rate", o.Rate, "open loop: requests per second (`req/s`), sent on schedule whatever the answers; 0: closed loop of --concurrency workers")
	fs.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "closed loop: workers, each sending its next request when the last is answered")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "measured time, after the warm-up (per step with --scenario)")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "load sent first and left out of every figure (per step with --scenario)")
	fs.IntVar(&o.IDs, "ids", o.IDs, "spread of order ids: requests cycle through o-1 … o-N")
	fs.Int64Var(&o.MaxRequests, "max-requests", o.MaxRequests, "stop after this many measured requests, even before --duration is up")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "per-request timeout; a request that times out counts as an error")
	fs.BoolVar(&o.JSON, "json", o.JSON, "print the summary as one JSON object")
	fs.BoolVar(&o.AllowRemote, "allow-remote", o.AllowRemote, "allow a --url that is not a loopback address")
	fs.StringVar(&o.Scenario, "scenario", o.Scenario, "run an in-process experiment (`name`) instead of loading --url: "+strings.Join(scenarioNames(), ", "))
	fs.StringVar(&o.Plot, "plot", o.Plot, "with --scenario: write the experiment's SVG charts into this `dir`ectory")
	fs.StringVar(&o.CPUProfile, "cpuprofile", o.CPUProfile, "with --scenario: write a CPU profile of the whole experiment (load, simulator and aggregators share the process) for go tool pprof")
	fs.StringVar(&o.MemProfile, "memprofile", o.MemProfile, "with --scenario: write an allocation profile of the whole experiment for go tool pprof (-sample_index=alloc_space or alloc_objects)")
	fs.StringVar(&o.RedisURL, "redis-url", o.RedisURL, "with --scenario: the last-good cache of the in-process orderagg; empty: a redis-server child process when one is on PATH, else embedded")
	return fs
}

// check reports the first value out of its range, naming the flag.
func (o Options) check() error {
	bad := func(name, format string, args ...any) error {
		return usagef("--%s (%s): %s", name, envName(name), fmt.Sprintf(format, args...))
	}
	switch {
	case config.CheckURL(o.URL, []string{"http", "https"}, false) != nil || o.URL == "":
		return bad("url", "want an http:// or https:// URL with a host, without a query or fragment")
	case math.IsNaN(o.Rate) || o.Rate < 0 || o.Rate > 1e6:
		return bad("rate", "want a number 0..1000000, got %v", o.Rate)
	case o.Concurrency < 1 || o.Concurrency > 100_000:
		return bad("concurrency", "want 1..100000, got %d", o.Concurrency)
	case o.Duration <= 0:
		return bad("duration", "must be positive, got %v", o.Duration)
	case o.Warmup < 0:
		return bad("warmup", "must not be negative, got %v", o.Warmup)
	case o.IDs < 1 || o.IDs > 1_000_000_000:
		return bad("ids", "want 1..1000000000, got %d", o.IDs)
	case o.MaxRequests < 1:
		return bad("max-requests", "want a whole number, at least 1, got %d", o.MaxRequests)
	case o.Timeout <= 0:
		return bad("timeout", "must be positive, got %v", o.Timeout)
	case o.Scenario != "" && !slices.Contains(scenarioNames(), o.Scenario):
		return bad("scenario", "want one of %s", strings.Join(scenarioNames(), ", "))
	case config.CheckURL(o.RedisURL, []string{"redis", "rediss"}, true) != nil:
		return bad("redis-url", "%v", config.CheckURL(o.RedisURL, []string{"redis", "rediss"}, true))
	}
	return nil
}

// parseOptions reads the command line, then the environment twins of the
// flags not on it. --help returns flag.ErrHelp; every other error matches
// errUsage and is one line naming the flag.
func parseOptions(args []string) (Options, error) {
	o := DefaultOptions()
	fs := flags(&o)
	if err := config.Parse(fs, args, config.EnvPrefix, true); err != nil {
		return Options{}, err
	}
	if err := o.check(); err != nil {
		return Options{}, err
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if o.Plot != "" && o.Scenario == "" {
		return Options{}, usagef("--plot (%s) needs --scenario: only the experiments draw charts", envName("plot"))
	}
	if o.CPUProfile != "" && o.Scenario == "" {
		return Options{}, usagef("--cpuprofile (%s) needs --scenario: profile your own deployment with its own tools", envName("cpuprofile"))
	}
	if o.MemProfile != "" && o.Scenario == "" {
		return Options{}, usagef("--memprofile (%s) needs --scenario: profile your own deployment with its own tools", envName("memprofile"))
	}
	if o.RedisURL != "" && o.Scenario == "" {
		return Options{}, usagef("--redis-url (%s) needs --scenario: it configures the experiments' in-process orderagg", envName("redis-url"))
	}
	return o, nil
}

// usage writes --help: every flag with its environment twin and default.
func usage(w io.Writer) {
	o := DefaultOptions()
	config.PrintUsage(w, flags(&o), config.EnvPrefix, "orderagg-loadtest [flags]", `Drives load at a running orderagg and prints throughput, latency
percentiles, the HTTP status mix, the share of degraded pages and, per
section, how many answers were live, cached or fallbacks. With --scenario it
instead runs one of the experiments of docs/experiments.md in-process.`)
}
