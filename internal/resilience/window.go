package resilience

import (
	"math"
	"slices"
	"sync"
	"time"
)

// counter indexes a bucket's counts: the kinds first, in Kind's order, then
// the other events /v1/resilience counts, named in counterNames.
type counter uint8

const (
	cSuccess counter = iota
	cFailure
	cTimeout
	cShortCircuited
	cRejected
	cBadRequest
	cDeadline
	cSlow
	cRetry
	cHedge
	cFallbackSuccess
	cFallbackFailure
	cCacheHit
	cCacheMiss
	numCounters
)

var counterNames = append(kindNames[:len(kindNames):len(kindNames)],
	"slow", "retry", "hedge", "fallback_success", "fallback_failure", "cache_hit", "cache_miss")

// recentSize is how many of the latest attempts' latencies a window keeps.
const recentSize = 4096

// window is a rolling window of counts in buckets, each cleared when its
// turn comes round again, and of the latencies of the latest recentSize
// attempts that reached the dependency. It is safe for concurrent use.
type window struct {
	mu      sync.Mutex
	width   int64 // of a bucket, ns
	buckets []bucket
	recent  [recentSize]sample // a ring; a zero sample is never in the window
	next    int
}

type bucket struct {
	epoch  int64 // which bucket-long interval since the Unix epoch it holds
	counts [numCounters]int64
}

type sample struct {
	epoch int64 // of the bucket the attempt ended in
	took  time.Duration
	ok    bool // the attempt succeeded
}

func newWindow(cfg BreakerConfig) *window {
	return &window{width: int64(cfg.Window) / int64(cfg.Buckets), buckets: make([]bucket, cfg.Buckets)}
}

// live reports whether bucket epoch is in the window ending at now and
// started at or after since.
func (w *window) live(epoch int64, now, since time.Time) bool {
	last := now.UnixNano() / w.width
	return epoch > last-int64(len(w.buckets)) && epoch <= last && epoch >= since.UnixNano()/w.width
}

// at is the bucket of now. Requires w.mu held.
func (w *window) at(now time.Time) *bucket {
	epoch := now.UnixNano() / w.width
	b := &w.buckets[epoch%int64(len(w.buckets))]
	if b.epoch != epoch {
		*b = bucket{epoch: epoch}
	}
	return b
}

func (w *window) add(now time.Time, c counter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at(now).counts[c]++
}

// record adds an attempt that reached the dependency: its kind, latency and
// slowness; every attempt after the first counts as a retry, a hedge also
// as a hedge.
func (w *window) record(e Event, slow bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.at(e.Start.Add(e.Duration))
	b.counts[e.Kind]++
	if slow {
		b.counts[cSlow]++
	}
	if e.Attempt > 1 {
		b.counts[cRetry]++
	}
	if e.Hedge {
		b.counts[cHedge]++
	}
	w.recent[w.next] = sample{b.epoch, e.Duration, e.Kind == KindSuccess}
	w.next = (w.next + 1) % recentSize
}

// counts sums the counts from since (zero: the whole window) to now.
func (w *window) counts(now, since time.Time) (out [numCounters]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.buckets {
		if w.live(b.epoch, now, since) {
			for c, n := range b.counts {
				out[c] += n
			}
		}
	}
	return out
}

// latencies are the window's recent latencies, sorted: of the successful
// attempts when okOnly, else of every attempt that reached the dependency.
func (w *window) latencies(now time.Time, okOnly bool) latencies {
	var out latencies
	w.mu.Lock()
	for _, s := range w.recent {
		if (s.ok || !okOnly) && w.live(s.epoch, now, time.Time{}) {
			out = append(out, s.took)
		}
	}
	w.mu.Unlock()
	slices.Sort(out)
	return out
}

// latencies is a sorted sample.
type latencies []time.Duration

// quantile is the least latency that a share q (0 < q ≤ 1) of the sample
// does not exceed; 0 of an empty sample.
func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	return l[max(int(math.Ceil(q*float64(len(l))))-1, 0)]
}

// Percentiles of latency over the window.
type Percentiles struct {
	P50, P90, P99, P999 time.Duration
	Count               int64
}

func (l latencies) percentiles() Percentiles {
	return Percentiles{P50: l.quantile(0.5), P90: l.quantile(0.9), P99: l.quantile(0.99), P999: l.quantile(0.999), Count: int64(len(l))}
}
