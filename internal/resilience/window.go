package resilience

import (
	"math/bits"
	"sync"
	"time"
)

// counter indexes a tally: a Kind, or one of the other events
// /v1/resilience counts. counterNames names them all.
type counter uint8

const (
	cRetry = counter(KindDeadline) + 1 + iota
	cFallbackSuccess
	cFallbackFailure
	cCacheHit
	cCacheMiss
	numCounters
)

var counterNames = append(kindNames[:len(kindNames):len(kindNames)],
	"retry", "fallback_success", "fallback_failure", "cache_hit", "cache_miss")

type tally [numCounters]int64

// bad is the failures and timeouts; calls adds the successes: the calls
// that reached the dependency and were not the caller's fault.
func (t *tally) bad() int64   { return t[KindFailure] + t[KindTimeout] }
func (t *tally) calls() int64 { return t[KindSuccess] + t.bad() }

// Latencies fall in log-linear bins of whole microseconds: one per value
// below 16, then 8 per power of two, so a bin's upper bound is within 12.5%
// of every value in it. The last bin holds everything from about 19 hours.
const (
	histSub    = 3
	histLinear = 16
	numBins    = histLinear + (36-4)<<histSub
)

func binOf(d time.Duration) int {
	us := uint64(max(d, 0) / time.Microsecond)
	if us < histLinear {
		return int(us)
	}
	e := bits.Len64(us) - 1
	return min(histLinear+(e-4)<<histSub+int(us>>(e-histSub))&(1<<histSub-1), numBins-1)
}

// binUpper is the largest duration in bin b.
func binUpper(b int) time.Duration {
	if b < histLinear {
		return time.Duration(b) * time.Microsecond
	}
	e := (b-histLinear)>>histSub + 4
	lo := uint64(1)<<e | uint64(b-histLinear)&(1<<histSub-1)<<(e-histSub)
	return time.Duration(lo+uint64(1)<<(e-histSub)-1) * time.Microsecond
}

// window is a rolling window of counts and latencies in buckets, a bucket
// cleared when its turn comes round again. It is safe for concurrent use.
type window struct {
	mu      sync.Mutex
	width   int64 // of a bucket, ns
	buckets []bucket
}

type bucket struct {
	epoch  int64 // which bucket-long interval since the Unix epoch it holds
	counts tally
	// Latencies of the attempts that reached the dependency: lat[0] of the
	// successful ones, lat[1] of the others.
	lat [2][numBins]uint32
}

func newWindow(cfg BreakerConfig) *window {
	return &window{width: int64(cfg.Window) / int64(cfg.Buckets), buckets: make([]bucket, cfg.Buckets)}
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

// live is the buckets of the window ending at now that started at or after
// since. Requires w.mu held.
func (w *window) live(now, since time.Time) []*bucket {
	last := now.UnixNano() / w.width
	first := max(last-int64(len(w.buckets))+1, since.UnixNano()/w.width)
	var out []*bucket
	for i := range w.buckets {
		if b := &w.buckets[i]; b.epoch >= first && b.epoch <= last {
			out = append(out, b)
		}
	}
	return out
}

func (w *window) add(now time.Time, c counter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at(now).counts[c]++
}

// record adds an attempt that reached the dependency: its kind and latency;
// every attempt after the first counts as a retry.
func (w *window) record(e Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.at(e.Start.Add(e.Duration))
	b.counts[e.Kind]++
	b.lat[min(e.Kind, 1)][binOf(e.Duration)]++
	if e.Attempt > 1 {
		b.counts[cRetry]++
	}
}

// counts sums the counts from since (zero: the whole window) to now.
func (w *window) counts(now, since time.Time) (out tally) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range w.live(now, since) {
		for c, n := range b.counts {
			out[c] += n
		}
	}
	return out
}

// latencies are the percentiles of the successful attempts when okOnly,
// else of every attempt that reached the dependency. A percentile is the
// upper bound of the bin holding it; 0 when there are no latencies.
func (w *window) latencies(now time.Time, okOnly bool) Percentiles {
	var bins [numBins]int64
	var total int64
	kinds := 2 // of lat
	if okOnly {
		kinds = 1
	}
	w.mu.Lock()
	for _, b := range w.live(now, time.Time{}) {
		for k := range kinds {
			for i, n := range b.lat[k][:] {
				bins[i], total = bins[i]+int64(n), total+int64(n)
			}
		}
	}
	w.mu.Unlock()
	quantile := func(q float64) Millis {
		var seen int64
		for i, n := range bins {
			if seen += n; n > 0 && float64(seen) >= q*float64(total) {
				return Millis(binUpper(i))
			}
		}
		return 0
	}
	return Percentiles{P50: quantile(0.5), P90: quantile(0.9), P99: quantile(0.99), P999: quantile(0.999), Count: total}
}

// Percentiles of latency over the window, of Count latencies.
type Percentiles struct {
	P50   Millis `json:"p50"`
	P90   Millis `json:"p90"`
	P99   Millis `json:"p99"`
	P999  Millis `json:"p999"`
	Count int64  `json:"count"`
}
