package dashboard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/orderagg/orderagg/build/testenv"
	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/resilience"
	"github.com/orderagg/orderagg/internal/sim"
)

// screenshotEnv, set to a file name (absolute, or relative to this
// package's directory), makes the browser test write its screenshot there,
// after letting the charts fill: `make screenshot` regenerates the README's
// docs/img/dashboard.png this way, so the picture cannot go stale.
const screenshotEnv = "ORDERAGG_SCREENSHOT"

// findChromium returns a Chromium-family browser on PATH. Without one the
// test is skipped on a developer's machine but fails in CI, where
// a silently skipped browser test would hide a broken page.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Missing(t, "no chromium, chromium-browser or google-chrome on PATH: install one (apt-get install chromium, make deps) to run the browser test")
	return ""
}

// profile is how a simulated dependency behaves when healthy.
type profile struct {
	name       string
	timeout    time.Duration
	minLatency time.Duration
	maxLatency time.Duration
}

var profiles = []profile{
	{sim.ServiceOrder, 400 * time.Millisecond, 15 * time.Millisecond, 45 * time.Millisecond},
	{sim.ServiceInventory, 300 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond},
	{sim.ServiceCoupon, 200 * time.Millisecond, 8 * time.Millisecond, 30 * time.Millisecond},
	{sim.ServiceLogistics, 300 * time.Millisecond, 30 * time.Millisecond, 90 * time.Millisecond},
	{"cache", 50 * time.Millisecond, 500 * time.Microsecond, 2 * time.Millisecond},
}

// newGuards builds real guards whose breakers open after a handful of
// calls, so that the test sees one open within seconds.
func newGuards(t *testing.T) map[string]*resilience.Guard {
	t.Helper()
	guards := make(map[string]*resilience.Guard, len(profiles))
	for _, p := range profiles {
		g, err := resilience.New(p.name, resilience.Config{
			Timeout:  p.timeout,
			Bulkhead: resilience.BulkheadConfig{MaxConcurrent: 10},
			Breaker: resilience.BreakerConfig{
				Window:      5 * time.Second,
				MinRequests: 5,
				SleepWindow: time.Minute, // stays open for the rest of the test
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		guards[p.name] = g
	}
	return guards
}

// traffic sends order-detail-like requests at a steady rate, whatever the
// answers: each calls the four downstream guards in parallel, as the service
// does, and a failed call falls back to a read through the cache guard. A
// steady rate matters: with a closed loop, calls that fail fast would raise
// the request rate just when a dependency breaks. stop ends the requests and
// waits for every call.
func traffic(guards map[string]*resilience.Guard, faults *sim.Server) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	call := func(ctx context.Context, p profile) error {
		_, err := resilience.Do(ctx, guards[p.name], func(ctx context.Context) (struct{}, error) {
			return struct{}{}, simulate(ctx, p, faults)
		})
		return err
	}
	cache := profiles[4]
	wg.Go(func() {
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, p := range profiles[:4] {
				wg.Go(func() {
					rctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
					defer cancel()
					if err := call(rctx, p); err != nil && rctx.Err() == nil {
						_, _ = resilience.Fallback(rctx, guards[p.name], err, func(ctx context.Context, _ error) (struct{}, error) {
							return struct{}{}, call(ctx, cache)
						})
					}
				})
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// simulate is one downstream call under the dependency's recorded fault.
func simulate(ctx context.Context, p profile, faults *sim.Server) error {
	f := faults.Faults()[p.name] // the cache has no fault: the zero Fault
	if f.Hang {
		<-ctx.Done()
		return ctx.Err()
	}
	d := p.minLatency + rand.N(p.maxLatency-p.minLatency+1) + time.Duration(f.LatencyMS)*time.Millisecond
	if !pause(ctx, d) {
		return ctx.Err()
	}
	if f.ErrorRate > 0 && rand.Float64() < f.ErrorRate {
		return fmt.Errorf("%s: injected %d", p.name, f.ErrorStatus)
	}
	return nil
}

// pause waits d or until ctx ends, and reports whether d passed.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// within runs steps with a time limit, in the browser that ctx has started.
func within(t *testing.T, ctx context.Context, limit time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		t.Fatalf("%s (within %v): %v", what, limit, err)
	}
}

// samples is how many reports the order tile's chart holds.
func samples(t *testing.T, ctx context.Context) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](chartSamples))
	if err != nil {
		t.Fatalf("reading the chart: %v", err)
	}
	return n
}

const chartSamples = `Number(document.querySelector('[data-dep="order"] [data-role="chart"]').dataset.samples)`

// waitSamples waits (at most a minute) until the order chart holds n reports.
func waitSamples(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	within(t, ctx, time.Minute, fmt.Sprintf("waiting for %d reports on the chart", n),
		chromedp.Poll[chromedp.Void](fmt.Sprintf("%s >= %d", chartSamples, n),
			chromedp.WithPollingInterval(250*time.Millisecond), chromedp.WithPollingTimeout(0)))
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(tctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// TestBrowserBreakItOpensTheBreaker drives the real page in headless
// Chromium against real guards: the page's own "Break it" control sets the
// logistics fault, the traffic then fails, the breaker opens, and the badge
// must say so.
func TestBrowserBreakItOpensTheBreaker(t *testing.T) {
	chromium := findChromium(t)
	shot := os.Getenv(screenshotEnv)
	update := shot != ""

	guards := newGuards(t)
	ordered := make([]*resilience.Guard, 0, len(profiles))
	for _, p := range profiles {
		ordered = append(ordered, guards[p.name])
	}
	faults := sim.New()
	d := New(Options{
		Report: func() handlers.ResilienceReport {
			return handlers.NewResilienceReport(time.Now(), 1500*time.Millisecond, ordered)
		},
		Faults:   faults,
		Interval: 250 * time.Millisecond,
	})
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	t.Cleanup(d.Close)
	t.Cleanup(traffic(guards, faults))
	d.Start()

	ctx := startBrowser(t, chromium)
	// Uncaught exceptions and browser errors (a refused Content-Security-
	// Policy, a failed request) mean a broken page even if the DOM looks right.
	problems := watchConsole(t, ctx)

	within(t, ctx, 15*time.Second, "loading the page",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(srv.URL+"/dashboard"),
	)
	steps := []chromedp.Action[chromedp.Void]{chromedp.WaitVisible(chromedp.CSS(`[data-role="connection"][data-state="live"]`))}
	for _, p := range profiles {
		steps = append(steps, chromedp.WaitVisible(chromedp.CSS(`[data-dep="`+p.name+`"] [data-role="breaker"]`)))
	}
	// The forms show once the page knows the faults in force, so typing
	// into them from now on cannot race the page filling them in.
	for _, p := range profiles[:4] {
		steps = append(steps, chromedp.WaitVisible(chromedp.CSS(`[data-dep="`+p.name+`"] [data-role="faults"]`)))
	}
	within(t, ctx, 10*time.Second, "waiting for a live tile per dependency", steps...)
	if got := text(t, ctx, `[data-dep="logistics"] [data-role="breaker-text"]`); got != "CLOSED" {
		t.Fatalf("logistics badge %q before the fault, want CLOSED", got)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('[data-dep="cache"] [data-role="fault-break"]')].filter(e => e.offsetParent !== null).length`)); err != nil || n != 0 {
		t.Errorf("the cache tile shows %d fault controls (%v); it is no simulated service", n, err)
	}

	// Faults typed into the forms reach the controller as typed: extra
	// latency on inventory, and on coupon a 20% error rate, which its
	// retries and the breaker's 50% threshold absorb.
	within(t, ctx, 10*time.Second, "setting faults from the forms",
		chromedp.SetValue(chromedp.CSS(`[data-dep="inventory"] [data-role="fault-latency"]`), "80"),
		chromedp.Click(chromedp.CSS(`[data-dep="inventory"] [data-role="fault-apply"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-dep="inventory"][data-faulty]`)),
		chromedp.SetValue(chromedp.CSS(`[data-dep="coupon"] [data-role="fault-error-rate"]`), "20"),
		chromedp.Click(chromedp.CSS(`[data-dep="coupon"] [data-role="fault-apply"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-dep="coupon"][data-faulty]`)),
	)
	if f := faults.Faults()[sim.ServiceInventory]; f.LatencyMS != 80 || f.ErrorRate != 0 || f.Hang {
		t.Errorf("inventory fault %+v, want 80ms latency only", f)
	}
	if f := faults.Faults()[sim.ServiceCoupon]; f.ErrorRate != 0.2 || f.LatencyMS != 0 || f.ErrorStatus != 500 {
		t.Errorf("coupon fault %+v, want error_rate 0.2 only", f)
	}
	// A value out of range is refused by the page and changes nothing.
	within(t, ctx, 10*time.Second, "submitting a bad error rate",
		chromedp.SetValue(chromedp.CSS(`[data-dep="order"] [data-role="fault-error-rate"]`), "150"),
		chromedp.Click(chromedp.CSS(`[data-dep="order"] [data-role="fault-apply"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-dep="order"] [data-role="fault-message"]`)),
		chromedp.SetValue(chromedp.CSS(`[data-dep="order"] [data-role="fault-error-rate"]`), "0"),
	)
	if f := faults.Faults()[sim.ServiceOrder]; f != healthy {
		t.Errorf("order fault %+v after a refused value", f)
	}

	within(t, ctx, 10*time.Second, "resetting order from its form",
		chromedp.Click(chromedp.CSS(`[data-dep="order"] [data-role="fault-reset"]`)),
		chromedp.WaitNotVisible(chromedp.CSS(`[data-dep="order"] [data-role="fault-message"]`)),
	)

	if update {
		// Let the charts gather most of their minute before the outage.
		waitSamples(t, ctx, 180)
	}

	within(t, ctx, 10*time.Second, "clicking Break it on logistics",
		chromedp.Click(chromedp.CSS(`[data-dep="logistics"] [data-role="fault-break"]`)),
	)
	within(t, ctx, 10*time.Second, "waiting for the logistics breaker to open",
		chromedp.WaitVisible(chromedp.CSS(`[data-dep="logistics"] [data-role="breaker"][data-state="OPEN"]`)),
	)
	if got := text(t, ctx, `[data-dep="logistics"] [data-role="breaker-text"]`); got != "OPEN" {
		t.Errorf("logistics badge %q, want OPEN", got)
	}
	if f := faults.Faults()[sim.ServiceLogistics]; f.ErrorRate != 1 {
		t.Errorf("logistics fault %+v, want error_rate 1", f)
	}
	if got := text(t, ctx, `[data-dep="logistics"] [data-role="fault-state"]`); !strings.Contains(got, "errors 100%") {
		t.Errorf("logistics fault state %q", got)
	}
	// The real guards' counts, every kind, fit too.
	for _, c := range clippedLabels(t, ctx) {
		t.Errorf("counter label clipped: %s", c)
	}
	for _, p := range profiles {
		if p.name == sim.ServiceLogistics {
			continue
		}
		if got := text(t, ctx, `[data-dep="`+p.name+`"] [data-role="breaker-text"]`); got != "CLOSED" {
			t.Errorf("%s badge %q: only logistics was broken", p.name, got)
		}
	}

	path := filepath.Join(t.TempDir(), "dashboard.png")
	if update {
		// Let the outage show on the charts: 3 s more at 4 reports a second,
		// while the 5 s window still holds the failures that opened it.
		waitSamples(t, ctx, samples(t, ctx)+12)
		path = shot
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)

	for _, p := range problems() {
		t.Errorf("browser console: %s", p)
	}
}

// startBrowser starts headless Chromium for the rest of the test. It runs
// on a context without a time limit (a limit on the first run would bound
// the browser's whole life); bound each step instead.
func startBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromium),
			chromedp.NoSandbox, // the tests run as root
			chromedp.Headless,
			chromedp.DisableGPU,
			chromedp.WindowSize(1280, 800),
		)...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	// Cleanups run last first: the browser goes before the servers the test
	// registered earlier, so no stream waits on it.
	t.Cleanup(cancelAlloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", chromium, err)
	}
	return ctx
}

// watchConsole gathers the page's uncaught exceptions and error-level
// console and browser-log messages from now on; the func returns them.
func watchConsole(t *testing.T, ctx context.Context) func() []string {
	t.Helper()
	var (
		mu  sync.Mutex
		got []string
	)
	add := func(s string) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	}
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			add(fmt.Sprintf("exception at %d:%d: %s", d.LineNumber, d.ColumnNumber, msg))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				add("console.error: " + strings.Join(parts, " "))
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				add(fmt.Sprintf("%s: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	if err != nil {
		t.Fatalf("listening to the console: %v", err)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// eventKinds are the event kinds the guards count (resilience's counter
// names).
var eventKinds = []string{"success", "failure", "timeout", "short_circuited", "rejected", "bad_request", "deadline",
	"retry", "fallback_success", "fallback_failure", "cache_hit", "cache_miss"}

// clippedLabels lists the event counters whose name does not show in full.
func clippedLabels(t *testing.T, ctx context.Context) []string {
	t.Helper()
	clipped, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('.events .k')].filter(k => k.scrollWidth > k.clientWidth).map(k => k.closest('[data-dep]').dataset.dep + ":" + k.textContent + " " + k.scrollWidth + ">" + k.clientWidth)`))
	if err != nil {
		t.Fatal(err)
	}
	return clipped
}

// firstLoadReport is a report at now of five dependencies with counts wide
// enough to need room (fallback_success in the tens of thousands); coupon
// has a recommended timeout, the others have too few successes (0).
func firstLoadReport(now time.Time, step int64) handlers.ResilienceReport {
	r := handlers.ResilienceReport{GeneratedAt: now, DeadlineMS: 1500}
	for i, p := range profiles {
		n := 1000*int64(i+1) + step
		// Every kind the guards count (a kind missing here could hide a
		// layout that spills), five digits each.
		counts := map[string]int64{}
		for _, kind := range eventKinds {
			counts[kind] = 10000 + n
		}
		d := resilience.Snapshot{
			Name: p.name, Breaker: resilience.StateClosed,
			Counts:       counts,
			ErrorPercent: 9.1,
			Latency:      resilience.Percentiles{P50: resilience.Millis(10 * time.Millisecond), P90: resilience.Millis(20 * time.Millisecond), P99: resilience.Millis(30 * time.Millisecond), P999: resilience.Millis(40 * time.Millisecond), Count: n},
			Bulkhead:     resilience.Usage{Capacity: 10},
			Timeout:      resilience.Millis(p.timeout.Truncate(time.Millisecond)),
			TimeoutMode:  "fixed",
			WindowMS:     10000,
		}
		if p.name == sim.ServiceCoupon {
			rec := resilience.Millis(148 * time.Millisecond)
			d.RecommendedTimeout = &rec
		}
		if p.name == sim.ServiceLogistics { // timeout: auto, its widest label
			lo, hi := resilience.Millis(10*time.Millisecond), resilience.Millis(time.Second)
			d.TimeoutMode, d.TimeoutMin, d.TimeoutMax = "auto", &lo, &hi
		}
		r.Dependencies = append(r.Dependencies, d)
	}
	return r
}

// TestBrowserFirstLoadExplainsItself opens the page on a dashboard that has
// sampled for a minute: the charts are full from the first report, no event
// counter's name is clipped at any width, and a dependency without a
// recommended timeout says so in words.
func TestBrowserFirstLoadExplainsItself(t *testing.T) {
	chromium := findChromium(t)
	now := time.Now().UTC().Truncate(time.Second)
	d := New(Options{
		Report:   func() handlers.ResilienceReport { return firstLoadReport(now, 60) },
		Interval: time.Hour, // only the first report: what a page shows on load
	})
	for i := range HistorySize {
		d.record(firstLoadReport(now.Add(time.Duration(i-HistorySize)*time.Second), int64(i)))
	}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	t.Cleanup(d.Close)

	// The contract's advisor answers null, not 0, while it cannot judge;
	// this stream says so in the raw JSON, as /v1/resilience does.
	stop := make(chan struct{})
	nullSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/dashboard/events" {
			d.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "retry: 600000\n\nevent: report\ndata: {\"generated_at\":%q,\"deadline_ms\":1500,\"dependencies\":["+
			`{"name":"coupon","breaker":"CLOSED","counts":{"success":3},"error_percent":0,`+
			`"latency_ms":{"p50":3,"p90":4,"p99":5,"p999":6,"count":3},"bulkhead":{"in_use":0,"capacity":10,"queued":0},`+
			`"timeout_ms":300,"recommended_timeout_ms":null,"window_ms":10000}]}`+"\n\n", now.Format(time.RFC3339))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(nullSrv.Close)
	t.Cleanup(func() { close(stop) })

	ctx := startBrowser(t, chromium)
	problems := watchConsole(t, ctx)

	// Three tiles a row from about 1170px (at 1240 and 1180 they are
	// near their 360px minimum), two at 800, one on a 390px phone.
	for _, width := range []int64{1440, 1280, 1240, 1180, 800, 390} {
		within(t, ctx, 15*time.Second, fmt.Sprintf("loading the page %dpx wide", width),
			chromedp.EmulateViewport(width, 900),
			chromedp.Navigate(srv.URL+"/dashboard"),
			chromedp.WaitVisible(chromedp.CSS(`[data-role="connection"][data-state="live"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-dep="cache"] [data-role="chart"]`)),
		)
		// One report has arrived, yet every chart holds the minute before it.
		n, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](
			`[...document.querySelectorAll('[data-role="chart"]')].map(s => Number(s.dataset.samples))`))
		if err != nil || len(n) != len(profiles) {
			t.Fatalf("%dpx: chart samples %v (%v)", width, n, err)
		}
		for i, got := range n {
			if got < HistorySize {
				t.Errorf("%dpx: chart %d holds %d points after the first report, want the %d of history and more", width, i, got, HistorySize)
			}
		}
		paths, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('[data-dep="order"] [data-role="chart"] .rate-line')].map(p => p.getAttribute("d"))`))
		if err != nil || len(paths) != 1 || strings.Count(paths[0], "L") < HistorySize-1 {
			t.Errorf("%dpx: order's rate line %q (%v), want a line through the history", width, paths, err)
		}
		// Every event name shows in full, in two columns or one.
		for _, c := range clippedLabels(t, ctx) {
			t.Errorf("%dpx: counter label clipped: %s", width, c)
		}
		cols, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](
			`[...document.querySelectorAll('.events')].map(l => new Set([...l.children].map(li => li.offsetLeft)).size)`))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cols {
			if c < 1 || c > 2 {
				t.Errorf("%dpx: an event list in %d columns, want 1 or 2", width, c)
			}
		}
		if got := text(t, ctx, `[data-dep="coupon"] [data-role="recommended"]`); got != "148 ms" {
			t.Errorf("%dpx: coupon's recommended timeout %q, want 148 ms", width, got)
		}
		if got := text(t, ctx, `[data-dep="order"] [data-role="recommended"]`); got != "not enough data" {
			t.Errorf("%dpx: order (recommended 0) shows %q, want not enough data", width, got)
		}
		// An adaptive sub-budget says so, with its bounds, in full.
		lg := text(t, ctx, `[data-dep="logistics"] [data-role="latency-text"]`)
		if !strings.HasSuffix(lg, "ms (auto, 10–1,000)") || strings.Contains(text(t, ctx, `[data-dep="order"] [data-role="latency-text"]`), "auto") {
			t.Errorf("%dpx: logistics' latency label %q, want its auto bounds; order's must not say auto", width, lg)
		}
		clipped, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
			`(e => e.scrollWidth > e.clientWidth || e.getBoundingClientRect().right > e.closest('[data-dep]').getBoundingClientRect().right)(document.querySelector('[data-dep="logistics"] [data-role="latency-text"]'))`))
		if err != nil || clipped {
			t.Errorf("%dpx: logistics' latency label overflows its tile (%v)", width, err)
		}
	}

	within(t, ctx, 15*time.Second, "loading the page whose report says null",
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(nullSrv.URL+"/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(`[data-dep="coupon"] [data-role="recommended"]`)),
	)
	if got := text(t, ctx, `[data-dep="coupon"] [data-role="recommended"]`); got != "not enough data" {
		t.Errorf("recommended_timeout_ms null shows %q, want not enough data", got)
	}
	if hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('[data-dep="coupon"] .rec').hidden`)); err != nil || !hidden {
		t.Errorf("the recommended-timeout mark shows for null (%v)", err)
	}
	for _, p := range problems() {
		t.Errorf("browser console: %s", p)
	}
}
