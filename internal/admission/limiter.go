package admission

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter decides, at once, whether one more order-detail request may start.
// Implementations are safe for concurrent use and never block.
type Limiter interface {
	// Acquire admits a request and returns its Token, or refuses it with
	// ok == false and the zero Token, which holds nothing to give back.
	Acquire() (t Token, ok bool)
	// Limit is the number of requests admitted at once right now.
	Limit() int
	// Inflight is the number of admitted requests not yet released.
	Inflight() int
}

// Outcome says how an admitted request ended, and so what its latency tells
// the limiter. The zero value, Ignored, is the safe default for paths that
// teach nothing (a bad request, a panic, a caller that went away).
type Outcome uint8

const (
	// Ignored returns the slot and teaches the limiter nothing.
	Ignored Outcome = iota
	// Succeeded: the request ran its course; its latency (Acquire to
	// Release) is a sample of how loaded the service is.
	Succeeded
	// Dropped: the request failed because of overload (it missed its
	// deadline); an adaptive limiter backs off.
	Dropped
)

func (o Outcome) String() string {
	switch o {
	case Ignored:
		return "ignored"
	case Succeeded:
		return "succeeded"
	case Dropped:
		return "dropped"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Token is one admitted request's slot. It is a small value (no allocation);
// keep it in a variable and release it exactly once, from a deferred
// function so that panics and early returns give the slot back too:
//
//	tok, ok := lim.Acquire()
//	if !ok {
//		return overloaded()
//	}
//	outcome := admission.Ignored
//	defer func() { tok.Release(outcome) }()
//
// (A plain `defer tok.Release(outcome)` would evaluate outcome at once.)
type Token struct {
	r     releaser // nil: the zero Token, or already released
	stamp int64
}

// Release gives the slot back and reports how the request ended. Only the
// first call on a Token does anything; later calls, and calls on the zero
// Token that a refused Acquire returns, are no-ops. Release is not safe to
// call on one Token from two goroutines at once; copies of a Token are
// independent, so do not copy one to release it twice.
func (t *Token) Release(o Outcome) {
	r := t.r
	if r == nil {
		return
	}
	t.r = nil
	r.release(t.stamp, o)
}

// Held reports whether the Token still holds a slot.
func (t *Token) Held() bool { return t.r != nil }

type releaser interface{ release(stamp int64, o Outcome) }

// ReleaseFunc takes back a slot handed out by NewToken: stamp is the value
// given to NewToken, o the request's Outcome. It is called at most once per
// Token.
type ReleaseFunc func(stamp int64, o Outcome)

func (f ReleaseFunc) release(stamp int64, o Outcome) { f(stamp, o) }

// NewToken is for Limiter implementations outside this package (test doubles,
// wrappers): it makes a Token whose first Release calls release(stamp, o).
// Build release once, not per call, to keep Acquire allocation-free.
func NewToken(release ReleaseFunc, stamp int64) Token {
	if release == nil {
		return Token{}
	}
	return Token{r: release, stamp: stamp}
}

// FixedLimiter admits at most a fixed number of requests at once: one atomic
// add to admit, one to refuse or release.
type FixedLimiter struct {
	inflight atomic.Int64
	_        [56]byte // inflight is written by every request; max only read
	max      int64
}

// Fixed returns a limiter of n requests at once; n <= 0 refuses every request.
func Fixed(n int) *FixedLimiter { return &FixedLimiter{max: int64(n)} }

// Acquire implements Limiter.
func (f *FixedLimiter) Acquire() (Token, bool) {
	if f.inflight.Add(1) > f.max {
		f.inflight.Add(-1)
		return Token{}, false
	}
	return Token{r: f}, true
}

func (f *FixedLimiter) release(int64, Outcome) { f.inflight.Add(-1) }

// Limit implements Limiter.
func (f *FixedLimiter) Limit() int { return int(f.max) }

// Inflight implements Limiter.
func (f *FixedLimiter) Inflight() int { return int(f.inflight.Load()) }

// AdaptiveConfig sets up an AdaptiveLimiter. Zero values mean the defaults.
type AdaptiveConfig struct {
	// Max is the highest limit and the starting one (--max-inflight).
	// Required, at least 1.
	Max int
	// Min is the lowest limit. Default 16, or Max if that is smaller.
	Min int
	// Tolerance: a window whose mean latency is up to Tolerance × the
	// baseline counts as unqueued. Default 2 (a processor-sharing server at
	// ~70% utilisation is about twice as slow as an idle one); at least 1.
	Tolerance float64
	// Window is how often the limit is recomputed. Default 100ms.
	Window time.Duration
	// MinSamples is the fewest samples that close a window; a window with
	// fewer stays open past Window. Default 10.
	MinSamples int
	// Settle: this long after the limit started falling, if it has at least
	// halved and the latency is still within a quarter of its worst since
	// (and no request is missing its deadline), cutting concurrency did not
	// help: the latency is not this process's own queueing but, say, a slow
	// dependency's. The limiter then restores the limit it cut from and
	// takes the latency as its new baseline. Make it longer than the
	// request deadline, so that every request admitted before the fall has
	// finished. Default 2s.
	Settle time.Duration
	// Now is the clock; default time.Now. Tests inject a fake one.
	Now func() time.Time
}

// Defaults of AdaptiveConfig.
const (
	DefaultMin        = 16
	DefaultTolerance  = 2
	DefaultWindow     = 100 * time.Millisecond
	DefaultMinSamples = 10
	DefaultSettle     = 2 * time.Second
)

func (c *AdaptiveConfig) fill() error {
	if c.Max < 1 {
		return fmt.Errorf("adaptive Max must be at least 1, got %d", c.Max)
	}
	switch {
	case c.Min == 0:
		c.Min = min(DefaultMin, c.Max)
	case c.Min < 0 || c.Min > c.Max:
		return fmt.Errorf("adaptive Min must be in [1, Max=%d], got %d", c.Max, c.Min)
	}
	switch {
	case c.Tolerance == 0:
		c.Tolerance = DefaultTolerance
	case !(c.Tolerance >= 1) || math.IsInf(c.Tolerance, 0):
		return fmt.Errorf("adaptive Tolerance must be at least 1, got %v", c.Tolerance)
	}
	switch {
	case c.Window == 0:
		c.Window = DefaultWindow
	case c.Window < 0:
		return fmt.Errorf("adaptive Window must be positive, got %v", c.Window)
	}
	switch {
	case c.MinSamples == 0:
		c.MinSamples = DefaultMinSamples
	case c.MinSamples < 0:
		return fmt.Errorf("adaptive MinSamples must be positive, got %d", c.MinSamples)
	}
	switch {
	case c.Settle == 0:
		c.Settle = DefaultSettle
	case c.Settle < 0:
		return fmt.Errorf("adaptive Settle must be positive, got %v", c.Settle)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// The window accumulator packs the sample count above the latency sum (in
// microseconds) so one atomic add records a sample and one swap takes a
// consistent window.
const (
	sumBits  = 40
	sumMask  = 1<<sumBits - 1
	countOne = 1 << sumBits
	// maxSampleMicros caps one sample (60 s) so that a window's sum cannot
	// overflow into the count before 2^14 such samples.
	maxSampleMicros = 60e6
)

// ErrConfig is wrapped by every configuration error of Adaptive.
var ErrConfig = errors.New("admission: invalid configuration")

// AdaptiveLimiter is a latency-gradient limiter (see the package doc). The
// request path is lock-free: Acquire is a clock read and an atomic add (plus
// a load, and a CAS only when a new in-window peak is set); Release is an
// atomic add, a clock read and an atomic add of the sample. Once per window
// one releaser recomputes the limit under a mutex that it only ever tries
// (TryLock), so no request waits for it.
type AdaptiveLimiter struct {
	// Written by every request.
	inflight atomic.Int64
	peak     atomic.Int64 // highest inflight since the window opened
	_        [48]byte
	acc      atomic.Uint64 // count<<sumBits | sum of latencies in µs
	drops    atomic.Int64
	_        [48]byte
	// Read by every request, written once per window.
	limit     atomic.Int64
	windowEnd atomic.Int64 // clock, ns since epoch
	_         [48]byte

	cfg   AdaptiveConfig
	epoch time.Time

	mu       sync.Mutex // held only to close a window, and only tried
	estimate float64    // the limit before rounding
	baseline float64    // µs; 0 until the first window closes
	// The current cut: the limit fell from cutFrom at cutAt; cutMean is the
	// highest window mean since. cutFrom is 0 when the limit is not below
	// where it last started falling.
	cutFrom, cutMean float64
	cutAt            int64
}

// Adaptive returns a latency-gradient limiter starting at cfg.Max.
func Adaptive(cfg AdaptiveConfig) (*AdaptiveLimiter, error) {
	if err := cfg.fill(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	a := &AdaptiveLimiter{cfg: cfg, epoch: cfg.Now(), estimate: float64(cfg.Max)}
	a.limit.Store(int64(cfg.Max))
	a.windowEnd.Store(int64(cfg.Window))
	return a, nil
}

func (a *AdaptiveLimiter) clock() int64 { return int64(a.cfg.Now().Sub(a.epoch)) }

// Acquire implements Limiter.
func (a *AdaptiveLimiter) Acquire() (Token, bool) {
	n := a.inflight.Add(1)
	if n > a.limit.Load() {
		a.inflight.Add(-1)
		return Token{}, false
	}
	for p := a.peak.Load(); n > p && !a.peak.CompareAndSwap(p, n); p = a.peak.Load() {
	}
	return Token{r: a, stamp: a.clock()}, true
}

func (a *AdaptiveLimiter) release(stamp int64, o Outcome) {
	a.inflight.Add(-1)
	if o != Succeeded && o != Dropped {
		return
	}
	now := a.clock()
	us := (now - stamp) / int64(time.Microsecond)
	us = max(0, min(us, maxSampleMicros))
	if o == Dropped {
		a.drops.Add(1)
	}
	a.acc.Add(countOne | uint64(us))
	if now >= a.windowEnd.Load() && a.mu.TryLock() {
		a.closeWindow(now)
		a.mu.Unlock()
	}
}

// closeWindow recomputes the limit from the window's samples; a.mu is held.
func (a *AdaptiveLimiter) closeWindow(now int64) {
	if now < a.windowEnd.Load() || int(a.acc.Load()>>sumBits) < a.cfg.MinSamples {
		return // already closed by another releaser, or too few samples yet
	}
	v := a.acc.Swap(0)
	drops := a.drops.Swap(0)
	peak := a.peak.Swap(a.inflight.Load())
	a.windowEnd.Store(now + int64(a.cfg.Window))
	n := v >> sumBits
	if n == 0 {
		return
	}
	mean := float64(v&sumMask) / float64(n)
	a.estimate = a.next(now, mean, drops > 0, float64(peak))
	a.limit.Store(int64(a.estimate))
}

// next is the gradient rule: given the window's mean latency (µs), whether
// it saw a drop and its peak in-flight count, it updates the baseline and
// returns the new limit estimate.
func (a *AdaptiveLimiter) next(now int64, mean float64, dropped bool, peak float64) float64 {
	mean = max(mean, 1) // a clock too coarse to see the request must not divide by 0
	cfg := &a.cfg
	if a.baseline == 0 || mean < a.baseline {
		a.baseline = mean // it only rises when a cut is undone
	}
	l := a.estimate
	if a.cutFrom > 0 {
		a.cutMean = max(a.cutMean, mean)
	}
	if a.cutFrom > 0 && now-a.cutAt >= int64(cfg.Settle) && l <= a.cutFrom/2 && mean > 0.75*a.cutMean && !dropped {
		// Concurrency at least halved for longer than any request lives,
		// yet the latency barely moved: it is not ours to fix. Undo the cut.
		l, a.baseline, a.cutFrom = a.cutFrom, mean, 0
		return l
	}
	switch binding := peak >= math.Floor(l); {
	case binding || dropped:
		// Our own overload: the limit was the constraint and latency rose
		// over tolerance, or requests missed their deadline (which the
		// guards prevent unless the process itself is starved). Scale what
		// was really in flight by the gradient, plus room to probe.
		gradient := min(1, max(0.5, cfg.Tolerance*a.baseline/mean))
		if dropped {
			gradient = 0.5
		}
		used := min(l, peak)
		l = used*gradient + math.Sqrt(used)
	default:
		// The limit refused no one and nothing was late: whatever the
		// latency says (a slow dependency raises the in-flight count at the
		// same throughput), cutting it would only refuse pages for nothing.
		// Relax back towards Max.
		l += math.Sqrt(l)
	}
	l = min(float64(cfg.Max), max(float64(cfg.Min), l))
	switch {
	case a.cutFrom == 0 && l < a.estimate:
		a.cutFrom, a.cutMean, a.cutAt = a.estimate, mean, now
	case a.cutFrom > 0 && l >= a.cutFrom:
		a.cutFrom = 0
	}
	return l
}

// Limit implements Limiter.
func (a *AdaptiveLimiter) Limit() int { return int(a.limit.Load()) }

// Inflight implements Limiter.
func (a *AdaptiveLimiter) Inflight() int { return int(a.inflight.Load()) }

// Baseline is the latency the limiter currently takes for "no queueing"; 0
// until the first window has closed. For status pages and experiments.
func (a *AdaptiveLimiter) Baseline() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return time.Duration(a.baseline * float64(time.Microsecond))
}

var (
	_ Limiter = (*FixedLimiter)(nil)
	_ Limiter = (*AdaptiveLimiter)(nil)
)
