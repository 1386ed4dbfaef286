package loadtest

import (
	"encoding/xml"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
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
