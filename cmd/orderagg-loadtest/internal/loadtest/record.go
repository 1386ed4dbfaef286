package loadtest

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/orderagg/orderagg/internal/downstream"
)

// Sections are the page's section keys (contract §2), in page order: the
// registry's, so a newly registered downstream is counted without an edit
// here.
var Sections = func() []string {
	var out []string
	for _, d := range downstream.Registered() {
		out = append(out, d.Section)
	}
	return out
}()

// Sources a section may report; a value outside these is counted under its
// own name, and a section absent from a 200 body under "missing", so a
// service that breaks the contract shows up in the figures.
var Sources = []string{"live", "cache", "fallback"}

// page is the part of a 200 body the summary needs: the degraded flag and
// each section's source and reason, not the sections' data.
type page struct {
	Degraded *bool
	Sections []*pageSection // by index in Sections; nil: absent
}

type pageSection struct {
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// parsePage decodes a 200 body; ok is false when it is not the contract's
// shape (not JSON, without the top-level degraded flag, or with a section
// that is not an object).
func parsePage(body []byte) (p page, ok bool) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return page{}, false
	}
	if err := json.Unmarshal(raw["degraded"], &p.Degraded); err != nil || p.Degraded == nil {
		return page{}, false
	}
	p.Sections = make([]*pageSection, len(Sections))
	for i, name := range Sections {
		b, present := raw[name]
		if !present {
			continue
		}
		var s pageSection
		if err := json.Unmarshal(b, &s); err != nil {
			return page{}, false
		}
		p.Sections[i] = &s
	}
	return p, true
}

// result is one finished request.
type result struct {
	// start is when the request was due: the moment it was sent in a closed
	// loop, its scheduled moment in an open one (so a late send counts
	// against the target, not for it).
	start   time.Time
	latency time.Duration
	status  int    // 0: no HTTP answer (see errKind)
	errKind string // why there was no answer: timeout, refused, reset, other
	body    []byte // the 200 body, to be parsed; nil otherwise
}

// recorder accumulates the measured results of one run. Workers call add
// concurrently; a mutex is enough at the rates one machine can drive.
type recorder struct {
	mu        sync.Mutex
	all       histogram
	full      histogram // 200 answers, degraded false
	partial   histogram // 200 answers, degraded true
	status    map[int]int64
	errKinds  map[string]int64
	degraded  int64
	badBodies int64
	sources   map[string]map[string]int64
	reasons   map[string]map[string]int64

	// timeline, when enabled, has one entry per second of the measured
	// window, by completion time: what the outage plots draw.
	timelineOn bool
	origin     time.Time
	timeline   []*second
}

// second is what finished in one second of the run.
type second struct {
	ok, degraded, failed int64 // 200 full, 200 degraded, everything else
	hist                 histogram
}

func newRecorder() *recorder {
	r := &recorder{
		status:   map[int]int64{},
		errKinds: map[string]int64{},
		sources:  map[string]map[string]int64{},
		reasons:  map[string]map[string]int64{},
	}
	for _, s := range Sections {
		r.sources[s] = map[string]int64{}
		for _, src := range Sources {
			r.sources[s][src] = 0
		}
		r.reasons[s] = map[string]int64{}
	}
	return r
}

// withTimeline turns on per-second figures, counted from origin.
func (r *recorder) withTimeline(origin time.Time) *recorder {
	r.timelineOn, r.origin = true, origin
	return r
}

// add records one result. The body is parsed outside the lock.
func (r *recorder) add(res result) {
	var (
		p      page
		parsed bool
	)
	if res.status == 200 {
		p, parsed = parsePage(res.body)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all.record(res.latency)
	kind := "failed"
	switch {
	case res.status == 0:
		r.errKinds[res.errKind]++
	case res.status == 200 && !parsed:
		r.status[res.status]++
		r.badBodies++
	case res.status == 200:
		r.status[res.status]++
		if *p.Degraded {
			r.degraded++
			r.partial.record(res.latency)
			kind = "degraded"
		} else {
			r.full.record(res.latency)
			kind = "ok"
		}
		for i, s := range p.Sections {
			name := Sections[i]
			if s == nil {
				r.sources[name]["missing"]++
				continue
			}
			r.sources[name][s.Source]++
			if s.Reason != "" {
				r.reasons[name][s.Reason]++
			}
		}
	default:
		r.status[res.status]++
	}
	if r.timelineOn {
		sec := int(res.start.Add(res.latency).Sub(r.origin) / time.Second)
		if sec < 0 {
			return
		}
		for len(r.timeline) <= sec {
			r.timeline = append(r.timeline, &second{})
		}
		s := r.timeline[sec]
		switch kind {
		case "ok":
			s.ok++
		case "degraded":
			s.degraded++
		default:
			s.failed++
		}
		s.hist.record(res.latency)
	}
}

// count is the number of results recorded so far.
func (r *recorder) count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.all.n
}

// Summary is the outcome of one run: what `orderagg-loadtest` prints, and
// with --json, the object it writes (see MarshalJSON: a figure without data
// is null there, never 0).
type Summary struct {
	// Settings are the run's load settings; nil when the caller did not
	// record them.
	Settings *Settings `json:"settings,omitempty"`
	// Requests measured: sent after the warm-up, answered or not.
	Requests int64 `json:"requests"`
	// RPS is Requests over the measured window (the achieved rate).
	RPS float64 `json:"rps"`
	// WindowS is the measured window in seconds: from the end of the warm-up
	// until the last measured request was sent.
	WindowS float64 `json:"window_s"`
	// Latency of every measured request, errors included (a timed-out
	// request counts its whole timeout).
	Latency Latency `json:"latency_ms"`
	// LatencyFull and LatencyDegraded split the 200 answers by the page's
	// degraded flag: a fast page that is mostly fallbacks is not a fast page.
	LatencyFull     Latency `json:"latency_full_ms"`
	LatencyDegraded Latency `json:"latency_degraded_ms"`
	// Status counts HTTP answers by status code.
	Status map[string]int64 `json:"status"`
	// Errors counts requests that got no HTTP answer at all; ErrorKinds
	// splits them (timeout, refused, reset, other).
	Errors     int64            `json:"errors"`
	ErrorKinds map[string]int64 `json:"error_kinds"`
	// DegradedRatio is the share of 200 answers whose page is degraded;
	// DegradedPages is their number.
	DegradedRatio float64 `json:"degraded_ratio"`
	DegradedPages int64   `json:"degraded_pages"`
	// BadBodies counts 200 answers that are not the contract's JSON.
	BadBodies int64 `json:"bad_bodies"`
	// Sources counts, per section, the 200 answers by the section's source
	// (live, cache, fallback; "missing" when a section was absent).
	Sources map[string]map[string]int64 `json:"sources"`
	// Reasons counts, per section, why it was not live (TIMEOUT, FAILURE,
	// SHORT_CIRCUITED, REJECTED, DEADLINE).
	Reasons map[string]map[string]int64 `json:"reasons"`
	// Timeline has one entry per second when the run recorded one.
	Timeline []Second `json:"timeline,omitempty"`
}

// Settings are what a run was asked to do, so a saved --json result says
// how it was produced. Durations are in the flags' own notation ("2s").
type Settings struct {
	URL  string `json:"url"`
	Mode string `json:"mode"` // "closed" (Concurrency workers) or "open" (Rate req/s)
	// Rate is null in a closed loop, Concurrency null in an open one: each
	// mode ignores the other's setting.
	Rate        *float64 `json:"rate"`
	Concurrency *int     `json:"concurrency"`
	Warmup      string   `json:"warmup"`
	Duration    string   `json:"duration"`
	MaxRequests int64    `json:"max_requests"`
	IDs         int      `json:"ids"`
	Timeout     string   `json:"timeout"`
}

// settings describes plan p against url.
func (p plan) settings(url string) *Settings {
	s := &Settings{URL: url, Mode: "closed", Warmup: p.Warmup.String(), Duration: p.Duration.String(),
		MaxRequests: p.MaxRequests, IDs: p.IDs, Timeout: p.Timeout.String()}
	if p.Rate > 0 {
		s.Mode, s.Rate = "open", &p.Rate
	} else {
		s.Concurrency = &p.Concurrency
	}
	return s
}

// MarshalJSON writes the summary with null for every figure that had no
// data: the rate without a measured window, a latency without requests of
// that kind, the degraded ratio without 200 answers. A 0 there would read
// as a measurement ("0 ms", "none degraded") that was never made. Counts
// stay numbers: zero requests of a kind is a fact.
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary // the same fields, without this method
	return json.Marshal(struct {
		plain
		RPS             *float64 `json:"rps"`
		Latency         *Latency `json:"latency_ms"`
		LatencyFull     *Latency `json:"latency_full_ms"`
		LatencyDegraded *Latency `json:"latency_degraded_ms"`
		DegradedRatio   *float64 `json:"degraded_ratio"`
	}{
		plain:           plain(s),
		RPS:             when(s.WindowS > 0, s.RPS),
		Latency:         when(s.Requests > 0, s.Latency),
		LatencyFull:     when(s.OK()-s.DegradedPages > 0, s.LatencyFull),
		LatencyDegraded: when(s.DegradedPages > 0, s.LatencyDegraded),
		DegradedRatio:   when(s.OK() > 0, s.DegradedRatio),
	})
}

// when is &v if there was data for v, else nil (JSON null).
func when[T any](data bool, v T) *T {
	if !data {
		return nil
	}
	return &v
}

// Second is one second of a run's timeline, by completion time.
type Second struct {
	T        int     `json:"t"`
	OK       int64   `json:"ok"`       // 200, not degraded
	Degraded int64   `json:"degraded"` // 200, degraded
	Failed   int64   `json:"failed"`   // any other status, or no answer
	P50MS    float64 `json:"p50_ms"`
	P99MS    float64 `json:"p99_ms"`
}

// MarshalJSON writes a second in which nothing finished with null
// percentiles, not 0 ms.
func (s Second) MarshalJSON() ([]byte, error) {
	type plain Second
	some := s.OK+s.Degraded+s.Failed > 0
	return json.Marshal(struct {
		plain
		P50MS *float64 `json:"p50_ms"`
		P99MS *float64 `json:"p99_ms"`
	}{plain(s), when(some, s.P50MS), when(some, s.P99MS)})
}

// summary computes the figures over a measured window of the given length.
func (r *recorder) summary(window time.Duration) Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Summary{
		Requests:        r.all.n,
		WindowS:         window.Seconds(),
		Latency:         r.all.latency(),
		LatencyFull:     r.full.latency(),
		LatencyDegraded: r.partial.latency(),
		Status:          map[string]int64{},
		ErrorKinds:      maps.Clone(r.errKinds),
		BadBodies:       r.badBodies,
		DegradedPages:   r.degraded,
		Sources:         map[string]map[string]int64{},
		Reasons:         map[string]map[string]int64{},
	}
	if window > 0 {
		s.RPS = float64(r.all.n) / window.Seconds()
	}
	for code, n := range r.status {
		s.Status[strconv.Itoa(code)] = n
	}
	for _, n := range r.errKinds {
		s.Errors += n
	}
	if ok := r.status[200]; ok > 0 {
		s.DegradedRatio = float64(r.degraded) / float64(ok)
	}
	for k, v := range r.sources {
		s.Sources[k] = maps.Clone(v)
	}
	for k, v := range r.reasons {
		s.Reasons[k] = maps.Clone(v)
	}
	for i, sec := range r.timeline {
		s.Timeline = append(s.Timeline, Second{
			T: i, OK: sec.ok, Degraded: sec.degraded, Failed: sec.failed,
			P50MS: ms(sec.hist.quantile(0.50)), P99MS: ms(sec.hist.quantile(0.99)),
		})
	}
	return s
}

// OK is the number of 200 answers.
func (s Summary) OK() int64 { return s.Status["200"] }

// Live is how many 200 answers had section sec live.
func (s Summary) Live(sec string) int64 { return s.Sources[sec]["live"] }

// sortedKeys returns m's keys in order, for stable output.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// phase sums the timeline's seconds [from, to): answers by kind and their
// latency. It needs a recorder made withTimeline.
func (r *recorder) phase(from, to int) (ok, degraded, failed int64, lat Latency) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var h histogram
	for i := from; i < to && i < len(r.timeline); i++ {
		if i < 0 {
			continue
		}
		s := r.timeline[i]
		ok, degraded, failed = ok+s.ok, degraded+s.degraded, failed+s.failed
		h.merge(&s.hist)
	}
	return ok, degraded, failed, h.latency()
}

// mergeFrom adds o's results to r (the timelines are not merged).
func (r *recorder) mergeFrom(o *recorder) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all.merge(&o.all)
	r.full.merge(&o.full)
	r.partial.merge(&o.partial)
	for k, v := range o.status {
		r.status[k] += v
	}
	for k, v := range o.errKinds {
		r.errKinds[k] += v
	}
	r.degraded += o.degraded
	r.badBodies += o.badBodies
	for sec, m := range o.sources {
		for k, v := range m {
			r.sources[sec][k] += v
		}
	}
	for sec, m := range o.reasons {
		for k, v := range m {
			r.reasons[sec][k] += v
		}
	}
}
