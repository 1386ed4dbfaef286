package resilience

import (
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// counter indexes the per-bucket counts of the rolling window.
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

func kindCounter(k Kind) counter {
	switch k {
	case KindSuccess:
		return cSuccess
	case KindFailure:
		return cFailure
	case KindTimeout:
		return cTimeout
	case KindShortCircuited:
		return cShortCircuited
	case KindRejected:
		return cRejected
	case KindBadRequest:
		return cBadRequest
	}
	return cDeadline
}

// Latency histogram: log-linear bins over microseconds. Values below 16µs
// get a bin each; above, each power of two is cut into 8 bins, so a bin's
// upper bound is within 12.5% of any value in it. 272 bins reach ~19 hours.
const (
	histSubBits = 3
	histLinear  = 16
	numBins     = histLinear + (36-4)*(1<<histSubBits)
)

func binOf(d time.Duration) int {
	us := uint64(d / time.Microsecond)
	if d < 0 {
		us = 0
	}
	if us < histLinear {
		return int(us)
	}
	e := bits.Len64(us) - 1 // ≥ 4
	sub := int(us>>(e-histSubBits)) & (1<<histSubBits - 1)
	b := histLinear + (e-4)*(1<<histSubBits) + sub
	if b >= numBins {
		return numBins - 1
	}
	return b
}

// binUpper is the largest duration that falls in bin b.
func binUpper(b int) time.Duration {
	if b < histLinear {
		return time.Duration(b) * time.Microsecond
	}
	e := (b-histLinear)/(1<<histSubBits) + 4
	sub := (b - histLinear) % (1 << histSubBits)
	lo := uint64(1)<<e | uint64(sub)<<(e-histSubBits)
	return time.Duration(lo+(uint64(1)<<(e-histSubBits))-1) * time.Microsecond
}

// Counters are striped so that two cores recording at once rarely touch the
// same cache line: recording picks a stripe at random (a per-thread cheap
// source), reading sums all of them.
const stripes = 4

type stripe struct {
	counts [numCounters]atomic.Int64
	// hist[histOK] holds successful attempts, hist[histOther] the rest:
	// the timeout advisor must see only successes (a timed-out call's
	// latency is the budget, not the dependency's), while the latency
	// figures and the retry rule see every attempt. One add either way.
	hist [2][numBins]atomic.Uint32
	_    [64]byte // keep neighbouring stripes off this cache line
}

const (
	histOK = iota
	histOther
)

type bucket struct {
	epoch   atomic.Int64 // which bucket-interval since the Unix epoch this holds
	_       [56]byte     // read by every call: keep it off stripe 0's line
	stripes [stripes]stripe
}

// window is a rolling time window of outcome counts and latencies, cut into
// buckets. Recording is lock-free; a bucket that has aged out is zeroed by
// the first recorder of its new interval under a mutex. Figures read across a
// bucket boundary may be off by the calls recorded during that instant —
// these are statistics, not accounting.
type window struct {
	bucketDur int64 // nanoseconds
	buckets   []bucket
	resetMu   sync.Mutex
}

func newWindow(length time.Duration, n int) *window {
	return &window{bucketDur: int64(length) / int64(n), buckets: make([]bucket, n)}
}

func (w *window) current(now time.Time) *bucket {
	idx := now.UnixNano() / w.bucketDur
	b := &w.buckets[idx%int64(len(w.buckets))]
	if b.epoch.Load() != idx {
		w.rotate(b, idx)
	}
	return b
}

func (w *window) rotate(b *bucket, idx int64) {
	w.resetMu.Lock()
	defer w.resetMu.Unlock()
	if b.epoch.Load() >= idx {
		return
	}
	for s := range b.stripes {
		for c := range b.stripes[s].counts {
			b.stripes[s].counts[c].Store(0)
		}
		for h := range b.stripes[s].hist {
			for i := range b.stripes[s].hist[h] {
				b.stripes[s].hist[h][i].Store(0)
			}
		}
	}
	b.epoch.Store(idx)
}

func (w *window) add(now time.Time, c counter) {
	w.current(now).stripes[rand.Uint32()%stripes].counts[c].Add(1)
}

// record adds one finished attempt: its outcome, whether it was slow, and its
// latency (only attempts that reached the dependency have a latency).
func (w *window) record(now time.Time, c counter, slow bool, latency time.Duration) {
	b := w.current(now)
	s := &b.stripes[rand.Uint32()%stripes]
	s.counts[c].Add(1)
	if slow {
		s.counts[cSlow].Add(1)
	}
	h := histOther
	if c == cSuccess {
		h = histOK
	}
	s.hist[h][binOf(latency)].Add(1)
}

// live reports whether bucket b belongs to the window ending at now and
// started at or after since.
func (w *window) live(b *bucket, nowIdx, sinceIdx int64) bool {
	e := b.epoch.Load()
	return e > nowIdx-int64(len(w.buckets)) && e <= nowIdx && e >= sinceIdx
}

// counts sums the window's counters over buckets that started at or after since.
func (w *window) counts(now, since time.Time) (out [numCounters]int64) {
	nowIdx, sinceIdx := now.UnixNano()/w.bucketDur, since.UnixNano()/w.bucketDur
	for i := range w.buckets {
		b := &w.buckets[i]
		if !w.live(b, nowIdx, sinceIdx) {
			continue
		}
		for s := range b.stripes {
			for c := range out {
				out[c] += b.stripes[s].counts[c].Load()
			}
		}
	}
	return out
}

// Percentiles of latency over the window.
type Percentiles struct {
	P50, P90, P99, P999 time.Duration
	Count               int64
}

// histogram is the window's latency histogram merged over live buckets.
type histogram struct {
	bins  [numBins]int64
	total int64
}

// histogram merges the live buckets' latencies: of successful attempts only
// when okOnly, else of every attempt that reached the dependency.
func (w *window) histogram(now time.Time, okOnly bool) *histogram {
	kinds := []int{histOK, histOther}
	if okOnly {
		kinds = kinds[:1]
	}
	h := new(histogram)
	nowIdx := now.UnixNano() / w.bucketDur
	for i := range w.buckets {
		b := &w.buckets[i]
		if !w.live(b, nowIdx, 0) {
			continue
		}
		for st := range b.stripes {
			for _, k := range kinds {
				for j := range h.bins {
					n := int64(b.stripes[st].hist[k][j].Load())
					h.bins[j] += n
					h.total += n
				}
			}
		}
	}
	return h
}

// quantile returns the upper bound of the bin holding the q-th quantile
// (0 < q ≤ 1), or 0 for an empty histogram.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	var seen int64
	for j, n := range h.bins {
		seen += n
		if float64(seen) >= q*float64(h.total) {
			return binUpper(j)
		}
	}
	return binUpper(numBins - 1)
}

func (h *histogram) percentiles() Percentiles {
	return Percentiles{
		P50:   h.quantile(0.50),
		P90:   h.quantile(0.90),
		P99:   h.quantile(0.99),
		P999:  h.quantile(0.999),
		Count: h.total,
	}
}
