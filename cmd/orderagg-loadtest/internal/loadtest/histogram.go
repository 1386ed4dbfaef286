package loadtest

import (
	"math"
	"math/bits"
	"time"
)

// histogram counts latencies in log-linear buckets, the way HdrHistogram
// does: values below 2^subBits microseconds are exact, larger ones fall in
// one of 2^subBits buckets per power of two, so any reported percentile is
// within 1/2^subBits (0.8 %) of a recorded value. Its memory is fixed
// (about 30 KiB) however long the run, which is what keeps a load test
// against a user's deployment bounded; exact minimum and maximum are kept
// beside it. The zero value is ready to use. It is not safe for concurrent
// use: the recorder serialises access.
type histogram struct {
	counts   []int64
	n        int64
	sum      time.Duration
	min, max time.Duration
}

const (
	subBits = 7
	subN    = 1 << subBits
	// maxExp bounds the exponent: 2^(maxExp+subBits) µs is about 4.5 days,
	// far beyond any request timeout; larger values are clamped.
	maxExp     = 32
	numBuckets = (maxExp + 1) * subN
)

// bucketOf maps a latency in microseconds to its bucket.
func bucketOf(us int64) int {
	if us < subN {
		if us < 0 {
			return 0
		}
		return int(us)
	}
	e := bits.Len64(uint64(us)) - subBits - 1 // us>>e is in [subN, 2*subN)
	if e >= maxExp {
		return numBuckets - 1
	}
	return (e+1)*subN + int(us>>e) - subN
}

// bucketRange returns the lowest and highest microsecond values of bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < subN {
		return int64(i), int64(i)
	}
	e := i/subN - 1
	lo = int64(i%subN+subN) << e
	return lo, lo + (int64(1) << e) - 1
}

func (h *histogram) record(d time.Duration) {
	if h.counts == nil {
		h.counts = make([]int64, numBuckets)
	}
	h.counts[bucketOf(d.Microseconds())]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.n++
	h.sum += d
}

// merge adds o's counts to h.
func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]int64, numBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the latency below which a fraction q (0..1) of the
// recorded values lie, by nearest rank: the value of rank ceil(q·n). It is
// the middle of the bucket holding that rank, clamped to the exact min and
// max, so the extremes are exact.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(q*float64(h.n))), 1)
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			v := time.Duration((lo+hi)/2) * time.Microsecond
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Latency is a latency distribution in milliseconds, as printed and as the
// JSON "latency_ms" object.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func (h *histogram) latency() Latency {
	return Latency{
		P50:  ms(h.quantile(0.50)),
		P90:  ms(h.quantile(0.90)),
		P99:  ms(h.quantile(0.99)),
		P999: ms(h.quantile(0.999)),
		Max:  ms(h.max),
		Mean: ms(h.mean()),
	}
}

// ms is d in milliseconds, rounded to the microsecond so output stays short.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}
