package resilience

import (
	"sync/atomic"
	"time"
)

// TimeoutChange reports a move of an adaptive sub-budget towards
// Recommended, the rule's figure over Successes successful calls.
type TimeoutChange struct {
	Dependency  string
	From, To    time.Duration
	At          time.Time
	Recommended time.Duration
	Successes   int64
}

// TimeoutListener is implemented by a Listener that wants to hear of an
// adaptive sub-budget's moves.
type TimeoutListener interface {
	OnTimeoutChange(c TimeoutChange)
}

// An adaptive sub-budget looks at the window once per adaptEvery at most,
// moves only when the rule's figure is more than adaptDeadBand away or
// pinned at a bound, and by at most adaptStep of its value a move.
const (
	adaptEvery    = time.Second
	adaptDeadBand = 0.10
	adaptStep     = 0.25
)

// adaptive is the state of an adaptive sub-budget (Config.AutoTimeout).
type adaptive struct {
	timeout  atomic.Int64 // ns: the sub-budget in force
	lookedAt atomic.Int64 // unix ns of the last look
}

// reconfigure brings the learnt value within cfg's bounds; turning
// AutoTimeout on starts it from cfg.Timeout.
func (a *adaptive) reconfigure(g *Guard, old *settings, cfg *Config) {
	from := time.Duration(a.timeout.Load())
	if old == nil || !old.cfg.AutoTimeout {
		from = cfg.Timeout
	}
	lo, hi := g.autoBounds(cfg)
	a.timeout.Store(int64(min(max(from, lo), hi)))
}

// autoBounds are an adaptive sub-budget's limits, timeout_min and
// timeout_max, both kept strictly below the calls' end (WithCallsEnd).
func (g *Guard) autoBounds(cfg *Config) (lo, hi time.Duration) {
	lo, hi = cfg.TimeoutMin, cfg.timeoutMax()
	if g.callsEnd > 0 {
		lo, hi = min(lo, g.callsEnd-time.Millisecond), min(hi, g.callsEnd-time.Millisecond)
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

// slowAfter is the slow-call threshold: SlowCallDuration, or 80% of the
// sub-budget in force.
func (g *Guard) slowAfter(s *settings) time.Duration {
	if s.cfg.Breaker.SlowCallDuration > 0 {
		return s.cfg.Breaker.SlowCallDuration
	}
	return g.inForce(s) * 8 / 10
}

// timeout is the sub-budget of a call starting at now, once an adaptive
// one has had its look at the window.
func (g *Guard) timeout(s *settings, now time.Time) time.Duration {
	last := g.auto.lookedAt.Load()
	if s.cfg.AutoTimeout && now.UnixNano()-last >= int64(adaptEvery) && g.auto.lookedAt.CompareAndSwap(last, now.UnixNano()) {
		if change := g.adapt(s, now); change != nil {
			if l, ok := g.listener.(TimeoutListener); ok {
				l.OnTimeoutChange(*change)
			}
		}
	}
	return g.inForce(s)
}

// adapt moves the adaptive sub-budget a step towards the rule's figure over
// successful calls. It holds still below AdvisorMinSuccesses, while the
// breaker is open or half-open and while failures and timeouts outnumber
// successes (a hang yields no successes, so it never raises it); and it
// does not shrink while over 0.1% of calls time out (the successes are then
// censored at the sub-budget, and their tail reads low).
func (g *Guard) adapt(s *settings, now time.Time) *TimeoutChange {
	c := s.window.counts(now, time.Time{})
	p := s.window.latencies(now, true).percentiles()
	if st := g.breaker.reported(); (st != StateClosed && st != StateForcedClosed) ||
		c[cFailure]+c[cTimeout] >= c[cSuccess] || p.Count < AdvisorMinSuccesses {
		return nil
	}
	lo, hi := g.autoBounds(&s.cfg)
	target := min(max(RecommendTimeout(p, s.cfg.TimeoutMargin), lo), hi)
	cur := time.Duration(g.auto.timeout.Load())
	diff, step := target-cur, time.Duration(adaptStep*float64(cur))
	switch {
	case diff < 0 && c[cTimeout]*1000 > c[cSuccess]+c[cFailure]+c[cTimeout]:
		return nil
	case target != lo && target != hi && float64(max(diff, -diff)) <= adaptDeadBand*float64(cur):
		return nil
	}
	next := min(max((cur+min(max(diff, -step), step)).Round(time.Millisecond), lo), hi)
	if next == cur {
		return nil
	}
	g.auto.timeout.Store(int64(next))
	return &TimeoutChange{Dependency: g.name, From: cur, To: next, At: now, Recommended: target, Successes: p.Count}
}
