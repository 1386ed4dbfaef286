package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"
)

// scenario is one self-contained experiment: it starts its own simulator
// and aggregators in-process, on loopback ports, drives load and reports.
type scenario struct {
	name  string
	about string
	run   func(ctx context.Context, e *experiment) error
}

// scenarios are the experiments of docs/experiments.md, in --help order.
func scenarios() []scenario {
	return []scenario{
		{"bulkhead-sweep", "bulkhead size 1…64 on an 80 ms dependency at 80 closed-loop workers", bulkheadSweep},
		{"hang", "one dependency hanging: healthy vs hanging, orderagg vs the bare floor", hang},
		{"retry-storm", "a dependency failing 50 %: physical attempts per request, bounded vs naive retries", retryStorm},
		{"floor", "healthy zero-latency downstreams: orderagg's cost against the bare floor", floorCost},
		{"outage", "throughput and P99 second by second through a 10 s logistics hang", outage},
		{"core-down", "the order down and uncached: calls to the other three per refused page", coreDown},
		{"latency-shift", "logistics drifts 150 → 450 → 150 ms: share of calls cut by timeouts and page P99, static 500 ms vs timeout: auto", latencyShift},
		{"embedded", "the embedded last-good cache against redis-server: pages/s side by side", embeddedVsRedis},
		{"hang-cost", "healthy vs logistics hung (breaker open), side by side: is a degraded page cheaper?", hangCost},
		{"flapping", "a minute of noise on logistics (±30 ms jitter, 2 % errors, 5 % stalls to 500 ms): breaker openings, zero the goal", flapping},
		{"callers", "16/64/256 closed-loop callers on healthy and on delayed downstreams: degraded and 503 shares, old bulkheads vs the defaults", callers},
	}
}

func scenarioNames() []string {
	var names []string
	for _, s := range scenarios() {
		names = append(names, s.name)
	}
	return names
}

func findScenario(name string) (scenario, bool) {
	for _, s := range scenarios() {
		if s.name == name {
			return s, true
		}
	}
	return scenario{}, false
}

// experiment is a scenario's run: its settings, its progress output and the
// report it fills in.
type experiment struct {
	o      Options
	stderr io.Writer
	tty    bool
	report *Report
	// redisPID is the redis-server child's process id, 0 when there is
	// none; its CPU is counted with the service's where a scenario says so.
	redisPID int
}

// Report is what a scenario prints: the table for people, and with --json
// the whole object, every step's full summary included.
type Report struct {
	Scenario string  `json:"scenario"`
	About    string  `json:"about"`
	Command  string  `json:"command"`
	Machine  Machine `json:"machine"`
	// Cache says what held the in-process orderagg's last-good cache.
	Cache   string     `json:"cache"`
	Load    string     `json:"load"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	// Findings are the headline figures, computed from steps of the same
	// run.
	Findings []string `json:"findings"`
	Steps    []Step   `json:"steps"`
	Notes    []string `json:"notes,omitempty"`
	Plots    []string `json:"plots,omitempty"`
}

// Step is one measured configuration of a scenario.
type Step struct {
	Name    string             `json:"name"`
	Derived map[string]float64 `json:"derived,omitempty"`
	Summary Summary            `json:"summary"`
}

// Machine is where a scenario ran: the figures mean little without it.
type Machine struct {
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPU        string `json:"cpu"`
	Go         string `json:"go"`
	// LoadAvg is the 1-minute load average when the scenario started and
	// LoadAvgEnd when it ended: a busy machine moves every absolute figure
	// (the ratios much less), and the scenario itself adds about 2.
	LoadAvg    string `json:"loadavg"`
	LoadAvgEnd string `json:"loadavg_end"`
	// Revision is the commit the binary was built from ("+modified" when
	// the tree had changes), so figures can be tied to the code measured.
	Revision string `json:"revision"`
}

func machine() Machine {
	m := Machine{NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), CPU: "unknown"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	m.LoadAvg = loadAvg()
	m.Revision = "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.modified":
				modified = kv.Value
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			m.Revision = rev
			if modified == "true" {
				m.Revision += "+modified"
			}
		}
	}
	return m
}

// loadAvg is the 1-minute load average, or "unknown" off Linux.
func loadAvg() string {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			return f[0]
		}
	}
	return "unknown"
}

// stepPlan is a scenario's default step, with the flags the user gave
// taking precedence.
func (e *experiment) stepPlan(concurrency int, warmup, duration time.Duration) plan {
	o := e.o
	p := plan{Concurrency: concurrency, Warmup: warmup, Duration: duration,
		MaxRequests: o.MaxRequests, IDs: o.IDs, Timeout: o.Timeout}
	if o.given("concurrency") {
		p.Concurrency = o.Concurrency
	}
	if o.given("warmup") {
		p.Warmup = o.Warmup
	}
	if o.given("duration") {
		p.Duration = o.Duration
	}
	if o.given("rate") {
		p.Rate = o.Rate
	}
	return p
}

// measure drives one step's load at url and returns its summary and the
// run's figures. The progress line (on a terminal) is labelled with name.
func (e *experiment) measure(ctx context.Context, name, url string, p plan, rec *recorder) (Summary, runStats) {
	idle := p.Concurrency
	if p.Rate > 0 {
		idle = 1024
	}
	t := newTarget(url, idle, false)
	defer t.close()
	if rec == nil {
		rec = newRecorder()
	}
	var progress func(time.Duration)
	if e.tty {
		progress = progressLine(e.stderr, name+": ", p, rec)
	}
	cpu0, ok0 := processCPU()
	st := run(ctx, t, p, rec, progress)
	if cpu1, ok1 := processCPU(); ok0 && ok1 {
		st.CPU = cpu1 - cpu0
	}
	if e.tty {
		fmt.Fprint(e.stderr, "\r\033[K")
	}
	s := rec.summary(st.Window)
	s.Settings = p.settings(url)
	return s, st
}

// runScenario runs o.Scenario and prints its report.
func runScenario(ctx context.Context, o Options, args []string, stdout, stderr io.Writer) int {
	sc, _ := findScenario(o.Scenario) // checked by the flag
	e := &experiment{o: o, stderr: stderr, tty: isTerminal(stderr), report: &Report{
		Scenario: sc.name, About: sc.about, Machine: machine(),
		Command: strings.TrimSpace("orderagg-loadtest " + strings.Join(args, " ")),
	}}
	if o.Plot != "" {
		if err := os.MkdirAll(o.Plot, 0o755); err != nil {
			fmt.Fprintf(stderr, "orderagg-loadtest: --plot %s: %v\n", o.Plot, err)
			return 1
		}
	}
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			fmt.Fprintf(stderr, "orderagg-loadtest: --cpuprofile: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "orderagg-loadtest: --cpuprofile: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if o.MemProfile != "" {
		f, err := os.Create(o.MemProfile)
		if err != nil {
			fmt.Fprintf(stderr, "orderagg-loadtest: --memprofile: %v\n", err)
			return 1
		}
		defer func() {
			// The allocs profile counts every allocation since the process
			// began, sampled as the runtime does by default.
			if err := errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close()); err != nil {
				fmt.Fprintf(stderr, "orderagg-loadtest: --memprofile: %v\n", err)
			}
		}()
	}
	switch {
	case o.RedisURL != "":
		e.report.Cache = "--redis-url " + o.RedisURL
	default:
		rs, err := startRedisServer(ctx)
		switch {
		case errors.Is(err, errNoRedisServer):
			e.report.Cache = "embedded (no redis-server on PATH): it runs in orderagg's process, and its CPU counts in orderagg's per page"
		case err != nil:
			fmt.Fprintf(stderr, "orderagg-loadtest: %v\n", err)
			return 1
		default:
			defer rs.stop()
			e.o.RedisURL = rs.url
			e.redisPID = rs.cmd.Process.Pid
			e.report.Cache = fmt.Sprintf("redis-server %s, a child process on %s, as a deployment has (give --redis-url to use another)", rs.version, strings.TrimPrefix(rs.url, "redis://"))
		}
	}
	err := sc.run(ctx, e)
	e.report.Machine.LoadAvgEnd = loadAvg()
	if err == nil && ctx.Err() != nil {
		err = errors.New("interrupted")
	}
	if err != nil {
		fmt.Fprintf(stderr, "orderagg-loadtest: scenario %s: %v\n", sc.name, err)
		return 1
	}
	if o.JSON {
		writeJSON(stdout, e.report)
	} else {
		writeReport(stdout, e.report)
	}
	return 0
}

// plot writes an SVG chart under --plot, if set.
func (e *experiment) plot(name string, c chart) error {
	if e.o.Plot == "" {
		return nil
	}
	path := filepath.Join(e.o.Plot, name)
	if err := os.WriteFile(path, c.svg(), 0o644); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	e.report.Plots = append(e.report.Plots, path)
	return nil
}

func (e *experiment) row(cells ...string) { e.report.Rows = append(e.report.Rows, cells) }

func (e *experiment) finding(format string, args ...any) {
	e.report.Findings = append(e.report.Findings, fmt.Sprintf(format, args...))
}

func (e *experiment) note(format string, args ...any) {
	e.report.Notes = append(e.report.Notes, fmt.Sprintf(format, args...))
}

func (e *experiment) step(name string, s Summary, derived map[string]float64) {
	e.report.Steps = append(e.report.Steps, Step{Name: name, Summary: s, Derived: derived})
}

// writeReport prints a scenario's report for people.
func writeReport(w io.Writer, r *Report) {
	m := r.Machine
	fmt.Fprintf(w, "scenario  %s: %s\n", r.Scenario, r.About)
	fmt.Fprintf(w, "command   %s\n", r.Command)
	fmt.Fprintf(w, "machine   %d CPU (%s), GOMAXPROCS %d, %s, load average %s at start, %s at the end\n", m.NumCPU, m.CPU, m.GOMAXPROCS, m.Go, m.LoadAvg, m.LoadAvgEnd)
	if m.Revision != "unknown" {
		fmt.Fprintf(w, "code      revision %s\n", m.Revision)
	}
	if r.Cache != "" {
		fmt.Fprintf(w, "cache     %s\n", r.Cache)
	}
	fmt.Fprintf(w, "load      %s\n\n", r.Load)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(r.Columns, "\t")+"\t")
	for _, row := range r.Rows {
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	_ = tw.Flush()
	if len(r.Findings) > 0 {
		fmt.Fprintln(w)
		for _, f := range r.Findings {
			fmt.Fprintf(w, "* %s\n", f)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, p := range r.Plots {
		fmt.Fprintf(w, "plot: %s\n", p)
	}
}

// f1 and friends format table cells.
func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }
func pc(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// perSec is n over the summary's window.
func perSec(n int64, s Summary) float64 { return ratio(float64(n), s.WindowS) }
