package loadtest

import (
	"errors"
	"fmt"
	"io"
	"math"
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

// flags defines the command's flags on o, through the service's flag layer
// (ff: the command line, then the ORDERAGG_* twins).
func flags(o *Options) *config.Flags {
	f := config.NewFlags("orderagg-loadtest")
	f.Func("url", "URL", "base URL of the orderagg service under test (loopback only unless --allow-remote)",
		func() string { return o.URL }, func(s string) error {
			if err := config.CheckURL(s, []string{"http", "https"}, false); err != nil || s == "" {
				return errors.New("want an http:// or https:// URL with a host, without a query or fragment")
			}
			o.URL = s
			return nil
		})
	f.Func("rate", "req/s", "open loop: requests per second, sent on schedule whatever the answers; 0: closed loop of --concurrency workers",
		func() string { return strconv.FormatFloat(o.Rate, 'g', -1, 64) }, func(s string) error {
			r, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(r) || r < 0 || r > 1e6 {
				return errors.New("want a number 0..1000000")
			}
			o.Rate = r
			return nil
		})
	f.Int(&o.Concurrency, "concurrency", "closed loop: workers, each sending its next request when the last is answered", 100_000)
	f.Duration(&o.Duration, "duration", "measured time, after the warm-up (per step with --scenario)", false)
	f.Duration(&o.Warmup, "warmup", "load sent first and left out of every figure (per step with --scenario)", true)
	f.Int(&o.IDs, "ids", "spread of order ids: requests cycle through o-1 … o-N", 1_000_000_000)
	f.Func("max-requests", "int", "stop after this many measured requests, even before --duration is up",
		func() string { return strconv.FormatInt(o.MaxRequests, 10) }, func(s string) error {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 1 {
				return errors.New("want a whole number, at least 1")
			}
			o.MaxRequests = n
			return nil
		})
	f.Duration(&o.Timeout, "timeout", "per-request timeout; a request that times out counts as an error", false)
	f.Bool(&o.JSON, "json", "print the summary as one JSON object")
	f.Bool(&o.AllowRemote, "allow-remote", "allow a --url that is not a loopback address")
	f.Choice(&o.Scenario, "scenario", "name", "run an in-process experiment instead of loading --url: "+strings.Join(scenarioNames(), ", "), scenarioNames())
	f.String(&o.Plot, "plot", "dir", "with --scenario: write the experiment's SVG charts into this directory")
	f.String(&o.CPUProfile, "cpuprofile", "file", "with --scenario: write a CPU profile of the whole experiment (load, simulator and aggregators share the process) for go tool pprof")
	f.String(&o.MemProfile, "memprofile", "file", "with --scenario: write an allocation profile of the whole experiment for go tool pprof (-sample_index=alloc_space or alloc_objects)")
	f.URL(&o.RedisURL, "redis-url", "with --scenario: the last-good cache of the in-process orderagg; empty: a redis-server child process when one is on PATH, else embedded",
		[]string{"redis", "rediss"}, true)
	return f
}

// parseOptions reads the command line, then the environment twins of the
// flags not on it. --help returns flag.ErrHelp; every other error matches
// errUsage and is one line naming the flag.
func parseOptions(args []string) (Options, error) {
	o := DefaultOptions()
	f := flags(&o)
	if err := f.Parse(args, true); err != nil {
		return Options{}, err
	}
	o.set = map[string]bool{}
	for _, d := range f.Table() {
		name := strings.TrimPrefix(d.Name, "--")
		o.set[name] = f.Given(name)
	}
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

// Table lists the flags in --help order with their defaults, in the form
// config.MarkdownTable renders, so the README's table can be generated and
// kept in sync like serve's and sim's.
func Table() []config.FlagDoc {
	o := DefaultOptions()
	return flags(&o).Table()
}

// usage writes --help: every flag with its environment twin and default.
func usage(w io.Writer) {
	config.WriteUsage(w, "orderagg-loadtest [flags]", `Drives load at a running orderagg and prints throughput, latency
percentiles, the HTTP status mix, the share of degraded pages and, per
section, how many answers were live, cached or fallbacks. With --scenario it
instead runs one of the experiments of docs/experiments.md in-process.`, Table())
}
