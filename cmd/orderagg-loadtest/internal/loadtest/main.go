package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Main runs `orderagg-loadtest` with args (the arguments after the
// sub-command) and returns the exit status: 0 when the run completed, 2 for
// a bad command line (one line on stderr naming the flag), 1 when the run
// failed: the target could not be reached, nothing answered, or ctx ended
// before the run did (the partial figures are still printed).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage(stdout)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "orderagg-loadtest: %v\n", err)
		return 2
	}
	if o.Scenario != "" {
		return runScenario(ctx, o, args, stdout, stderr)
	}
	return loadURL(ctx, o, stdout, stderr)
}

// loadURL is a plain load test against --url.
func loadURL(ctx context.Context, o Options, stdout, stderr io.Writer) int {
	u, _ := url.Parse(o.URL) // checked by the flag
	if !o.AllowRemote {
		if err := checkLoopback(ctx, u); err != nil {
			if errors.Is(err, errNotLoopback) {
				fmt.Fprintf(stderr, "orderagg-loadtest: --url %s (%s): %v; load tests target loopback only unless --allow-remote (%s) is given\n",
					o.URL, envName("url"), err, envName("allow-remote"))
				return 2
			}
			fmt.Fprintf(stderr, "orderagg-loadtest: --url %s: %v\n", o.URL, err)
			return 1
		}
	}
	p := plan{Rate: o.Rate, Concurrency: o.Concurrency, Warmup: o.Warmup, Duration: o.Duration,
		MaxRequests: o.MaxRequests, IDs: o.IDs, Timeout: o.Timeout}
	idle := o.Concurrency
	if o.Rate > 0 {
		idle = 1024 // enough kept-alive connections for an open loop's bursts
	}
	t := newTarget(o.URL, idle, o.AllowRemote)
	defer t.close()
	if err := preflight(ctx, t, o); err != nil {
		fmt.Fprintf(stderr, "orderagg-loadtest: cannot reach %s: %v\n", o.URL, err)
		return 1
	}

	rec := newRecorder()
	var progress func(time.Duration)
	if isTerminal(stderr) {
		progress = progressLine(stderr, "", p, rec)
	}
	st := run(ctx, t, p, rec, progress)
	if progress != nil {
		fmt.Fprint(stderr, "\r\033[K")
	}
	s := rec.summary(st.Window)
	s.Settings = p.settings(o.URL)
	if o.JSON {
		writeJSON(stdout, s)
	} else {
		fmt.Fprintf(stdout, "target  %s\nload    %s, %s warm-up + %s measured, ids o-1…o-%d, timeout %s\n\n",
			o.URL, p.mode(), o.Warmup, o.Duration, o.IDs, o.Timeout)
		writeSummary(stdout, s)
	}
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "orderagg-loadtest: interrupted; the figures cover the part that ran")
		return 1
	case s.Requests > 0 && s.Errors == s.Requests:
		fmt.Fprintf(stderr, "orderagg-loadtest: no request got an answer (%s)\n", kinds(s.ErrorKinds))
		return 1
	}
	return 0
}

// preflight sends one GET /healthz, so a wrong URL fails in a moment
// instead of after the whole run. Only a missing answer fails it: a proxy
// in front may well not route /healthz.
func preflight(ctx context.Context, t *target, o Options) error {
	rctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, strings.TrimSuffix(o.URL, "/")+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	return resp.Body.Close()
}

// progressLine returns the once-a-second progress printer for a terminal:
// one line, rewritten in place with \r.
func progressLine(w io.Writer, label string, p plan, rec *recorder) func(time.Duration) {
	var last int64
	return func(elapsed time.Duration) {
		n := rec.count()
		phase := "measuring"
		if elapsed < p.Warmup {
			phase = "warm-up"
		}
		total := p.Warmup + p.Duration
		s := rec.summary(0)
		fmt.Fprintf(w, "\r\033[K%s%s %3.0fs/%s  measured %d  last 1s %d/s  p99 %.1fms  errors %d  degraded %.1f%%",
			label, phase, elapsed.Seconds(), total, n, n-last, s.Latency.P99, s.Errors+sumStatus(s.Status, 500), 100*s.DegradedRatio)
		last = n
	}
}

// sumStatus counts the answers with a status of at least from.
func sumStatus(status map[string]int64, from int) int64 {
	var n int64
	for code, c := range status {
		if v, err := strconv.Atoi(code); err == nil && v >= from {
			n += c
		}
	}
	return n
}

func kinds(m map[string]int64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeSummary prints a summary for people.
func writeSummary(w io.Writer, s Summary) {
	fmt.Fprintf(w, "requests  %d in %.1fs = %.1f req/s\n", s.Requests, s.WindowS, s.RPS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency ms\tp50\tp90\tp99\tp99.9\tmax\t")
	row := func(name string, l Latency, n int64) {
		if n == 0 {
			return
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", name, l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	row("all", s.Latency, s.Requests)
	row("full pages", s.LatencyFull, s.OK()-s.DegradedPages)
	row("degraded pages", s.LatencyDegraded, s.DegradedPages)
	_ = tw.Flush()

	var codes []string
	for _, c := range sortedKeys(s.Status) {
		codes = append(codes, fmt.Sprintf("%s: %d", c, s.Status[c]))
	}
	if s.Errors > 0 {
		codes = append(codes, fmt.Sprintf("no answer: %d (%s)", s.Errors, kinds(s.ErrorKinds)))
	}
	fmt.Fprintf(w, "\nstatus    %s\n", strings.Join(codes, ", "))
	fmt.Fprintf(w, "degraded  %.2f%% of 200 answers\n", 100*s.DegradedRatio)
	if s.BadBodies > 0 {
		fmt.Fprintf(w, "bad bodies  %d 200 answers were not the contract's JSON\n", s.BadBodies)
	}
	if s.OK() == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "section\tlive\tcache\tfallback\tnot live because")
	for _, sec := range Sections {
		src := s.Sources[sec]
		extra := ""
		for _, k := range sortedKeys(src) {
			if k != "live" && k != "cache" && k != "fallback" && src[k] > 0 {
				extra += fmt.Sprintf(" (%s: %d)", k, src[k])
			}
		}
		why := kinds(s.Reasons[sec])
		if why == "" {
			why = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s%s\n", sec, pct(src["live"], s.OK()), pct(src["cache"], s.OK()),
			pct(src["fallback"], s.OK()), why, extra)
	}
	_ = tw.Flush()
}

func pct(n, of int64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%d (%.1f%%)", n, 100*float64(n)/float64(of))
}
