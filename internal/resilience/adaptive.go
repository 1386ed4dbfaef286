package resilience

import (
	"sync"
	"sync/atomic"
	"time"
)

// TimeoutChange reports an adaptive sub-budget's move.
type TimeoutChange struct {
	Dependency string
	From, To   time.Duration
	At         time.Time
	// Recommended is the rule's figure it moves towards, from Successes
	// successful calls in the window.
	Recommended time.Duration
	Successes   int64
}

// TimeoutListener is implemented by a Listener that wants to hear of an
// adaptive sub-budget's moves.
type TimeoutListener interface {
	OnTimeoutChange(c TimeoutChange)
}

// An adaptive sub-budget looks at the window at most once per adaptEvery,
// moves only when the rule's figure is more than adaptDeadBand away (unless
// pinned at a bound), and by at most adaptStep of its value per move.
const (
	adaptEvery    = time.Second
	adaptDeadBand = 0.10
	adaptStep     = 0.25
)

// adaptive is the state of an adaptive sub-budget (Config.AutoTimeout).
type adaptive struct {
	mu       sync.Mutex
	timeout  atomic.Int64 // ns: the sub-budget in force
	lookedAt atomic.Int64 // unix ns of the last look
}

// reconfigure brings the learnt value within cfg's bounds; turning
// AutoTimeout on starts it from cfg.Timeout.
func (a *adaptive) reconfigure(g *Guard, old *settings, cfg *Config) {
	if !cfg.AutoTimeout {
		return
	}
	from := time.Duration(a.timeout.Load())
	if old == nil || !old.cfg.AutoTimeout {
		from = cfg.Timeout
	}
	lo, hi := g.autoBounds(cfg)
	a.timeout.Store(int64(min(max(from, lo), hi)))
}

// autoBounds are an adaptive sub-budget's limits: timeout_min and
// timeout_max, both kept strictly below the calls' end (WithCallsEnd).
func (g *Guard) autoBounds(cfg *Config) (lo, hi time.Duration) {
	lo, hi = cfg.TimeoutMin, cfg.timeoutMax()
	if g.callsEnd > 0 {
		ceiling := g.callsEnd - time.Millisecond
		lo, hi = min(lo, ceiling), min(hi, ceiling)
	}
	return lo, hi
}

// inForce is the sub-budget in force.
func (g *Guard) inForce(s *settings) time.Duration {
	if s.cfg.AutoTimeout {
		return time.Duration(g.auto.timeout.Load())
	}
	return s.cfg.Timeout
}

// timeout is the sub-budget of a call starting at now, after letting an
// adaptive one look at the window.
func (g *Guard) timeout(s *settings, now time.Time) time.Duration {
	if s.cfg.AutoTimeout && now.UnixNano()-g.auto.lookedAt.Load() >= int64(adaptEvery) && g.auto.mu.TryLock() {
		change := g.adapt(s, now)
		g.auto.mu.Unlock()
		if l, ok := g.listener.(TimeoutListener); ok && change != nil {
			l.OnTimeoutChange(*change)
		}
	}
	return g.inForce(s)
}

// slowAfter is the slow-call threshold: SlowCallDuration, or 80% of the
// sub-budget in force.
func (g *Guard) slowAfter(s *settings) time.Duration {
	if s.cfg.Breaker.SlowCallDuration > 0 {
		return s.cfg.Breaker.SlowCallDuration
	}
	return g.inForce(s) * 8 / 10
}

// adapt moves the adaptive sub-budget one step towards the rule's figure
// over successful calls. It holds still below AdvisorMinSuccesses, while
// the breaker is not closed and while failures and timeouts outnumber
// successes (a hang yields no successes, so it never raises it), and does
// not shrink while over 0.1% of calls time out (the successes are then
// censored at the sub-budget and their tail reads low). g.auto.mu held.
func (g *Guard) adapt(s *settings, now time.Time) *TimeoutChange {
	if now.UnixNano()-g.auto.lookedAt.Load() < int64(adaptEvery) {
		return nil
	}
	g.auto.lookedAt.Store(now.UnixNano())
	if st := g.breaker.reported(); st != StateClosed && st != StateForcedClosed {
		return nil
	}
	c := s.window.counts(now, time.Time{})
	p := s.window.latencies(now, true).percentiles()
	if c[cFailure]+c[cTimeout] >= c[cSuccess] || p.Count < AdvisorMinSuccesses {
		return nil
	}
	lo, hi := g.autoBounds(&s.cfg)
	target := min(max(RecommendTimeout(p, s.cfg.TimeoutMargin), lo), hi)
	cur := time.Duration(g.auto.timeout.Load())
	diff := target - cur
	if diff < 0 && c[cTimeout]*1000 > c[cSuccess]+c[cFailure]+c[cTimeout] {
		return nil
	}
	if atBound := target == lo || target == hi; !atBound && float64(max(diff, -diff)) <= adaptDeadBand*float64(cur) {
		return nil
	}
	step := time.Duration(adaptStep * float64(cur))
	next := min(max((cur+min(max(diff, -step), step)).Round(time.Millisecond), lo), hi)
	if next == cur {
		return nil
	}
	g.auto.timeout.Store(int64(next))
	return &TimeoutChange{Dependency: g.name, From: cur, To: next, At: now, Recommended: target, Successes: p.Count}
}
