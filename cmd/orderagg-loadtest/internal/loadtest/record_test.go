package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/downstream"
)

func TestHistogramBucketsCoverEveryValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		us := rng.Int64N(1 << 36)
		lo, hi := bucketRange(bucketOf(us))
		if us < lo || us > hi {
			t.Fatalf("%d µs lands in bucket [%d, %d]", us, lo, hi)
		}
		if width := hi - lo + 1; us >= subN && float64(width)/float64(lo) > 1.0/float64(subN)+1e-12 {
			t.Fatalf("bucket [%d, %d] is wider than 1/%d of its values", lo, hi, subN)
		}
	}
	for us := int64(0); us < 4*subN; us++ { // contiguous at the seams
		if b, next := bucketOf(us), bucketOf(us+1); next != b && next != b+1 {
			t.Fatalf("buckets jump from %d to %d at %d µs", b, next, us)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ { // 1 … 1000 ms
		h.record(time.Duration(i) * time.Millisecond)
	}
	near := func(name string, got time.Duration, want float64) {
		t.Helper()
		ms := float64(got) / float64(time.Millisecond)
		if ms < want*0.99 || ms > want*1.01 {
			t.Errorf("%s = %.3f ms, want %v ms ± 1 %%", name, ms, want)
		}
	}
	near("p50", h.quantile(0.50), 500)
	near("p90", h.quantile(0.90), 900)
	near("p99", h.quantile(0.99), 990)
	near("p99.9", h.quantile(0.999), 999)
	if h.quantile(1) != time.Second || h.max != time.Second || h.min != time.Millisecond {
		t.Errorf("extremes: q(1) %v, max %v, min %v; want exact", h.quantile(1), h.max, h.min)
	}
	if h.mean() != 500500*time.Microsecond {
		t.Errorf("mean %v", h.mean())
	}
	l := h.latency()
	if l.Max != 1000 || l.P50 > l.P90 || l.P90 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max {
		t.Errorf("latency %+v not ordered", l)
	}
	var empty histogram
	if empty.quantile(0.5) != 0 || empty.latency() != (Latency{}) {
		t.Error("an empty histogram reports zeros")
	}
	var one histogram
	one.record(1234 * time.Microsecond)
	if one.quantile(0.5) != 1234*time.Microsecond || one.quantile(0.999) != 1234*time.Microsecond {
		t.Errorf("a single value is its own percentile: %v", one.quantile(0.5))
	}
}

func TestRecorderMergeAndTimeline(t *testing.T) {
	origin := time.Now()
	body := func(degraded bool) []byte {
		src := `"live","degraded":false`
		if degraded {
			src = `"fallback","degraded":true,"reason":"SHORT_CIRCUITED"`
		}
		return []byte(`{"order_id":"o-1","degraded":` + map[bool]string{true: "true", false: "false"}[degraded] +
			`,"order":{"source":"live","degraded":false},"inventory":{"source":"live","degraded":false},"coupons":{"source":"live","degraded":false},"logistics":{"source":` + src + `}}`)
	}
	r := newRecorder().withTimeline(origin)
	for i := range 10 { // second 0: 10 full pages at 10 ms
		r.add(result{start: origin.Add(time.Duration(i) * 50 * time.Millisecond), latency: 10 * time.Millisecond, status: 200, body: body(false)})
	}
	for i := range 4 { // second 2: 4 degraded pages at 500 ms, one 504, one refused
		r.add(result{start: origin.Add(1600*time.Millisecond + time.Duration(i)*time.Millisecond), latency: 500 * time.Millisecond, status: 200, body: body(true)})
	}
	r.add(result{start: origin.Add(2 * time.Second), latency: 100 * time.Millisecond, status: 504})
	r.add(result{start: origin.Add(2 * time.Second), latency: time.Millisecond, errKind: "refused"})
	r.add(result{start: origin, latency: time.Millisecond, status: 200, body: []byte("not json")})

	s := r.summary(4 * time.Second)
	if s.Requests != 17 || s.RPS != 17.0/4 || s.OK() != 15 || s.Status["504"] != 1 || s.Errors != 1 || s.ErrorKinds["refused"] != 1 || s.BadBodies != 1 {
		t.Errorf("summary %+v", s)
	}
	if s.DegradedPages != 4 || s.Sources["logistics"]["fallback"] != 4 || s.Reasons["logistics"]["SHORT_CIRCUITED"] != 4 || s.Live("logistics") != 10 {
		t.Errorf("sources %v reasons %v", s.Sources, s.Reasons)
	}
	if len(s.Timeline) != 3 || s.Timeline[0].OK != 11-1 || s.Timeline[2].Degraded != 4 || s.Timeline[2].Failed != 2 || s.Timeline[1] != (Second{T: 1}) {
		t.Errorf("timeline %+v", s.Timeline)
	}
	ok, deg, failed, lat := r.phase(2, 3)
	if ok != 0 || deg != 4 || failed != 2 || lat.Max != 500 {
		t.Errorf("phase(2,3) = %d %d %d %+v", ok, deg, failed, lat)
	}

	m := newRecorder()
	m.mergeFrom(r)
	m.mergeFrom(r)
	ms := m.summary(8 * time.Second)
	if ms.Requests != 34 || ms.OK() != 30 || ms.Sources["logistics"]["fallback"] != 8 || ms.Latency != s.Latency {
		t.Errorf("merged %+v", ms)
	}
}

func TestChartIsWellFormedSVG(t *testing.T) {
	c := chart{
		Title: "A & B <test>", XLabel: "x",
		XTicks: []tick{{0, "1"}, {1, "2"}, {2, "4"}},
		Panels: []panel{
			{Title: "one", YLabel: "req/s", Shade: [][2]float64{{0.5, 1.5}}, ShadeLabel: "outage", Series: []series{
				{Name: "measured", X: []float64{0, 1, 2}, Y: []float64{12, 25, 48}, Markers: true},
				{Name: "ideal", X: []float64{0, 1, 2}, Y: []float64{12.5, 25, 50}, Dashed: true},
			}},
			{Title: "two", YLabel: "ms", Series: []series{{Name: "p99", X: []float64{0, 1, 2}, Y: []float64{0, 0, 0}}}},
		},
	}
	out := string(c.svg())
	dec := xml.NewDecoder(strings.NewReader(out))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, out)
		}
	}
	for _, want := range []string{"<svg", "A &amp; B &lt;test&gt;", "measured", "ideal", "outage", "stroke-dasharray", "<circle"} {
		if !strings.Contains(out, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		last   float64
	}{{0, 97, 100}, {0, 1000, 1000}, {0, 0.3, 0.3}, {0, 0, 1}, {0, 1450, 1500}} {
		ticks := niceTicks(c.lo, c.hi, 5)
		if got := ticks[len(ticks)-1]; got < c.hi || got > c.last*1.0001 || ticks[0] != 0 {
			t.Errorf("niceTicks(%v, %v) = %v", c.lo, c.hi, ticks)
		}
	}
}

// jsonOf is v as --json writes it, decoded into generic values so that a
// null can be told from a 0.
func jsonOf(t *testing.T, v any) map[string]any {
	t.Helper()
	var b bytes.Buffer
	writeJSON(&b, v)
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return m
}

// A figure without data is null in --json, never a 0 that reads as a
// measurement; counts stay numbers.
func TestSummaryJSONNullsWhereThereWasNoData(t *testing.T) {
	origin := time.Now()
	page := func(degraded bool) []byte {
		sec := `{"source":"live","degraded":false}`
		return []byte(`{"degraded":` + strconv.FormatBool(degraded) + `,"order":` + sec + `,"inventory":` + sec + `,"coupons":` + sec + `,"logistics":` + sec + `}`)
	}
	for _, tc := range []struct {
		name   string
		add    []result
		window time.Duration
		null   []string // top-level keys that must be null
		number []string // top-level keys that must be numbers or objects
	}{{
		name: "nothing measured", window: 0,
		null:   []string{"rps", "latency_ms", "latency_full_ms", "latency_degraded_ms", "degraded_ratio"},
		number: []string{"requests", "window_s", "errors", "degraded_pages", "bad_bodies"},
	}, {
		name: "only 503s", window: time.Second,
		add:    []result{{start: origin, latency: 3 * time.Millisecond, status: 503}},
		null:   []string{"latency_full_ms", "latency_degraded_ms", "degraded_ratio"},
		number: []string{"rps", "latency_ms", "requests"},
	}, {
		name: "only full pages", window: time.Second,
		add:    []result{{start: origin, latency: 3 * time.Millisecond, status: 200, body: page(false)}},
		null:   []string{"latency_degraded_ms"},
		number: []string{"rps", "latency_ms", "latency_full_ms", "degraded_ratio"},
	}, {
		name: "only degraded pages", window: time.Second,
		add:    []result{{start: origin, latency: 3 * time.Millisecond, status: 200, body: page(true)}},
		null:   []string{"latency_full_ms"},
		number: []string{"rps", "latency_ms", "latency_degraded_ms", "degraded_ratio"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			for _, res := range tc.add {
				r.add(res)
			}
			m := jsonOf(t, r.summary(tc.window))
			for _, k := range tc.null {
				if v, ok := m[k]; !ok || v != nil {
					t.Errorf("%s = %v (present %v), want null", k, v, ok)
				}
			}
			for _, k := range tc.number {
				if m[k] == nil {
					t.Errorf("%s is null or missing, want a figure", k)
				}
			}
			if _, ok := m["settings"]; ok {
				t.Errorf("settings written though none were recorded: %v", m["settings"])
			}
		})
	}
	// The 0 that was measured stays 0: a ratio of no degraded pages.
	r := newRecorder()
	r.add(result{start: origin, latency: time.Millisecond, status: 200, body: page(false)})
	if m := jsonOf(t, r.summary(time.Second)); m["degraded_ratio"] != 0.0 {
		t.Errorf("degraded_ratio = %v, want 0", m["degraded_ratio"])
	}

	// A second of the timeline in which nothing finished has no percentiles.
	r = newRecorder().withTimeline(origin)
	r.add(result{start: origin, latency: 10 * time.Millisecond, status: 200, body: page(false)})
	r.add(result{start: origin.Add(2 * time.Second), latency: 10 * time.Millisecond, status: 503})
	tl := jsonOf(t, r.summary(3*time.Second))["timeline"].([]any)
	if len(tl) != 3 {
		t.Fatalf("timeline %v", tl)
	}
	for i, want := range []bool{false, true, false} {
		sec := tl[i].(map[string]any)
		if (sec["p50_ms"] == nil) != want || (sec["p99_ms"] == nil) != want {
			t.Errorf("second %d: p50 %v p99 %v, want null: %v", i, sec["p50_ms"], sec["p99_ms"], want)
		}
		if sec["ok"] == nil || sec["failed"] == nil {
			t.Errorf("second %d: counts null: %v", i, sec)
		}
	}
	// What --json writes still decodes into a Summary.
	var b bytes.Buffer
	writeJSON(&b, r.summary(3*time.Second))
	var back Summary
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back.Requests != 2 || back.Latency.Max != 10 || len(back.Timeline) != 3 {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

// --json records how the run was made: the target, the loop and its size,
// the durations as given, the id spread and the limits.
func TestSummaryJSONHasTheRunSettings(t *testing.T) {
	srv := fakeService(t, 0)
	for _, tc := range []struct {
		args []string
		want map[string]any
	}{{
		args: []string{"--concurrency", "3"},
		want: map[string]any{"mode": "closed", "concurrency": 3.0, "rate": nil},
	}, {
		args: []string{"--rate", "400"},
		want: map[string]any{"mode": "open", "rate": 400.0, "concurrency": nil},
	}} {
		args := append([]string{"--url", srv.URL, "--ids", "4", "--max-requests", "8", "--warmup", "0s",
			"--duration", "30s", "--timeout", "2500ms", "--json"}, tc.args...)
		code, out, stderr := runMain(t, context.Background(), nil, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr %s", args, code, stderr)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		set, ok := m["settings"].(map[string]any)
		if !ok {
			t.Fatalf("%v: no settings object in %s", tc.args, out)
		}
		want := map[string]any{"url": srv.URL, "warmup": "0s", "duration": "30s", "timeout": "2.5s", "ids": 4.0, "max_requests": 8.0}
		maps.Copy(want, tc.want)
		for k, w := range want {
			if got, ok := set[k]; !ok || got != w {
				t.Errorf("%v: settings.%s = %v (present %v), want %v", tc.args, k, got, ok, w)
			}
		}
		if len(set) != len(want) {
			t.Errorf("%v: settings %v, want exactly the keys of %v", tc.args, set, want)
		}
	}
}

// The sections counted are the registry's, in page order, and a page that
// is not the contract's shape is a bad body.
func TestParsePage(t *testing.T) {
	var want []string
	for _, d := range downstream.Registered() {
		want = append(want, d.Section)
	}
	if !slices.Equal(Sections, want) || !slices.Contains(Sections, "coupons") {
		t.Errorf("Sections = %v, want the registry's page keys %v", Sections, want)
	}
	p, ok := parsePage([]byte(`{"order_id":"o-1","degraded":true,"order":{"source":"live","degraded":false,"data":{"x":1}},"logistics":{"source":"fallback","reason":"TIMEOUT","status":"UNKNOWN"},"extra":{"source":"live"}}`))
	if !ok || !*p.Degraded || len(p.Sections) != len(Sections) {
		t.Fatalf("parsePage = %+v, %v", p, ok)
	}
	if p.Sections[0].Source != "live" || p.Sections[1] != nil || p.Sections[2] != nil || *p.Sections[3] != (pageSection{"fallback", "TIMEOUT"}) {
		t.Errorf("sections %+v %+v %+v %+v", p.Sections[0], p.Sections[1], p.Sections[2], p.Sections[3])
	}
	for _, bad := range []string{`not json`, `{}`, `{"degraded":null}`, `{"degraded":"yes"}`, `{"degraded":false,"order":"live"}`, `[]`} {
		if _, ok := parsePage([]byte(bad)); ok {
			t.Errorf("parsePage(%s) accepted", bad)
		}
	}
}
