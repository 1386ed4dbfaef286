package dashboard

import (
	"maps"
	"sync"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
)

// HistorySize is how many samples the dashboard keeps, one a
// HistoryInterval: the chart's minute.
const HistorySize = 60

// HistoryInterval is how often Start's sampler records a sample.
const HistoryInterval = time.Second

// withHistory is the first report of a stream: the report, plus the samples
// of the last minute, oldest first, for the page's charts.
type withHistory struct {
	handlers.ResilienceReport
	History []sample `json:"history"`
}

// sample is what the chart needs of one report: per dependency the rolling
// counts it derives the request rate from, and the error percentage. Zero
// counts are left out; the page reads a missing kind as 0.
type sample struct {
	At           time.Time   `json:"generated_at"`
	Dependencies []sampleDep `json:"dependencies"`
}

type sampleDep struct {
	Name         string           `json:"name"`
	Counts       map[string]int64 `json:"counts"`
	ErrorPercent float64          `json:"error_percent"`
	WindowMS     int64            `json:"window_ms"`
}

// history is a ring of the last HistorySize samples; safe for concurrent
// use.
type history struct {
	mu   sync.Mutex
	ring [HistorySize]sample
	next int // where the next sample goes
	n    int // samples held, at most HistorySize
}

func (h *history) add(r handlers.ResilienceReport) {
	s := sample{At: r.GeneratedAt, Dependencies: make([]sampleDep, 0, len(r.Dependencies))}
	for _, d := range r.Dependencies {
		counts := maps.Clone(d.Counts)
		maps.DeleteFunc(counts, func(_ string, n int64) bool { return n == 0 })
		if counts == nil {
			counts = map[string]int64{}
		}
		s.Dependencies = append(s.Dependencies, sampleDep{Name: d.Name, Counts: counts, ErrorPercent: d.ErrorPercent, WindowMS: d.WindowMS})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring[h.next] = s
	h.next = (h.next + 1) % HistorySize
	h.n = min(h.n+1, HistorySize)
}

// samples returns the samples held, oldest first; never nil, so the page
// always finds a list. Samples are never changed once added, so sharing
// their maps with the caller is safe.
func (h *history) samples() []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]sample, 0, h.n)
	for i := range h.n {
		out = append(out, h.ring[(h.next-h.n+i+HistorySize)%HistorySize])
	}
	return out
}

// Start records a sample of the report now and then every HistoryInterval
// until Close, so that a page opened at any time starts with the last
// minute on its charts. Without Start, streams start with no history. It
// returns at once; a second call, or one after Close, does nothing.
func (d *Dashboard) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.closed {
		return
	}
	d.started = true
	d.streams.Add(1)
	go func() {
		defer d.streams.Done()
		tick, stop := d.ticker(HistoryInterval)
		defer stop()
		for {
			d.history.add(d.report())
			select {
			case <-tick:
			case <-d.closing:
				return
			}
		}
	}()
}
