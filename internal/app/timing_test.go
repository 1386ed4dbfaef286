package app

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/orderagg/orderagg/internal/config"
)

// Timing in these tests is read where the service measures it. The test
// process is also the service's, and on a loaded machine the client's wall
// clock holds its own scheduling delays (dialling, reading, a goroutine
// waiting for a CPU) on top of the service's time; the contract's deadline
// runs from the request's arrival to the answer, which is what the service
// records in orderagg_http_request_duration_seconds.

// serverTimes is that histogram's count and sum, over all its series
// (status, degraded).
type serverTimes struct {
	count uint64
	sum   time.Duration
}

func (s *service) serverTimes() serverTimes {
	s.t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(s.metricsText()))
	if err != nil {
		s.t.Fatalf("parse /metrics: %v", err)
	}
	var st serverTimes
	fam := fams["orderagg_http_request_duration_seconds"]
	if fam == nil {
		return st // no order-detail answer yet
	}
	for _, m := range fam.GetMetric() {
		h := m.GetHistogram()
		st.count += h.GetSampleCount()
		st.sum += time.Duration(h.GetSampleSum() * float64(time.Second))
	}
	return st
}

// timedGet is get plus the service's own measure of that answer, arrival to
// answer, and how long the process was held up meanwhile (see stallWatch).
// The service records an answer as its handler returns, which may be just
// after the client has it, so the count is polled (bounded) until it has
// grown by one; the sum has then grown by exactly this answer's time. The
// hold-up is taken over the client's whole exchange, which holds the
// service's. Only for tests that send one order-detail request at a time.
func (s *service) timedGet(path string) (a answer, took, held time.Duration) {
	s.t.Helper()
	before := s.serverTimes()
	from := time.Now()
	a = s.get(path)
	var after serverTimes
	waitUntil(s.t, func() bool { after = s.serverTimes(); return after.count > before.count })
	held = s.stalls.heldUp(from, time.Now())
	if after.count != before.count+1 {
		s.t.Fatalf("%d order-detail answers recorded during one request: is another one running?", after.count-before.count)
	}
	return a, after.sum - before.sum, held
}

// hangBudget is the sub-budget of a dependency a test makes hang: any value
// gives the same answer (a hang never returns), a short one keeps the test
// quick.
const hangBudget = 100 * time.Millisecond

// hangBudgets gives the named dependencies, which the test makes hang,
// hangBudget; every other setting keeps its default. The defaults are sized
// for a healthy dependency answering a cold, loaded process: a tight budget
// on a dependency that is meant to answer would make the test about the
// scheduler, not about the service.
func hangBudgets(hung ...string) func(*config.Serve) {
	return func(cfg *config.Serve) {
		for _, name := range hung {
			if !cfg.Dependencies.Update(name, func(d *config.Dependency) { d.Timeout = hangBudget }) {
				panic("hangBudgets: no dependency " + name)
			}
		}
	}
}

// patientCache lets last-good reads take a good part of the page's time,
// within the rules every setting must meet: the reserve grows to 400 ms (the
// calls, the order's 1 s included, still end before the deadline less it),
// the cache's sub-budget is just inside the reserve, and every downstream's
// fallback may take the whole deadline (a fallback still outlasts a cache
// read). The default 50 ms suits a Redis nearby, not a loaded test process;
// tests that check what the cache answers use this so that a slow read
// cannot turn a hit into a miss.
func patientCache(cfg *config.Serve) {
	cfg.Reserve = 400 * time.Millisecond
	cfg.Dependencies.Update(config.NameCache, func(d *config.Dependency) { d.Timeout = cfg.Reserve - 50*time.Millisecond })
	for _, name := range cfg.Dependencies.Names() {
		if name != config.NameCache {
			cfg.Dependencies.Update(name, func(d *config.Dependency) { d.FallbackTimeout = cfg.Deadline })
		}
	}
}

// patientRedisURL is a --redis-url for addr whose socket timeouts (100 ms
// reads and 200 ms dials by default, a backstop below the request's
// deadline) give way to patientCache's budget, for tests that check what a
// real Redis answers.
func patientRedisURL(addr string) string {
	def := config.DefaultServe()
	d := (def.Deadline - def.Reserve).String()
	return "redis://" + addr + "/0?dial_timeout=" + d + "&read_timeout=" + d + "&write_timeout=" + d
}

// getLive asks for path until the page comes back whole (every section
// live), bounded by waitUntil. The first page of a cold process may miss a
// sub-budget on a loaded machine; tests that need the live answers
// remembered in the cache wait for one here, not on the scheduler's luck.
func (s *service) getLive(path string) answer {
	s.t.Helper()
	var a answer
	waitUntil(s.t, func() bool {
		a = s.get(path)
		return a.status == http.StatusOK && a.body["degraded"] == false
	})
	return a
}

// stallWatch notes the time this process was held up: a goroutine that asks
// to wake every millisecond and records each wake-up that came late. When
// the machine is loaded (or the runtime pauses), every goroutine waits
// alike, the service's included, and nothing the service does can make up
// for it. A late answer is the service's fault beyond the time the process
// was held up while it was being made; with the process running freely,
// that is no time at all, and the check is the plain deadline.
type stallWatch struct {
	mu     sync.Mutex
	stalls []interval
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// interval is a stretch of wall time.
type interval struct{ from, to time.Time }

const (
	stallTick  = time.Millisecond
	stallSlack = time.Millisecond // a timer's ordinary lateness
)

// watchStalls starts a stallWatch; close ends it.
func watchStalls() *stallWatch {
	w := &stallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// close ends the watch and waits for its goroutine; what it noted stays.
func (w *stallWatch) close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

func (w *stallWatch) run() {
	defer close(w.done)
	tick := time.NewTimer(stallTick)
	defer tick.Stop()
	prev := time.Now()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		if due := prev.Add(stallTick + stallSlack); now.After(due) {
			w.mu.Lock()
			w.stalls = append(w.stalls, interval{from: prev.Add(stallTick), to: now})
			w.mu.Unlock()
		}
		prev = now
		tick.Reset(stallTick)
	}
}

// heldUp is how long the process was held up between from and to.
func (w *stallWatch) heldUp(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var held time.Duration
	for _, s := range w.stalls {
		a, b := s.from, s.to
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			held += b.Sub(a)
		}
	}
	return held
}

// orderSpans is a span exporter keeping, of every span, only the times of
// the order-detail server spans: arrival to answer of each request, as the
// service saw it.
type orderSpans struct {
	mu    sync.Mutex
	spans []interval
}

func (e *orderSpans) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindServer && s.Name() == "GET /v1/orders/:id" {
			e.spans = append(e.spans, interval{from: s.StartTime(), to: s.EndTime()})
		}
	}
	return nil
}

func (e *orderSpans) Shutdown(context.Context) error { return nil }

func (e *orderSpans) all() []interval {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.spans)
}
