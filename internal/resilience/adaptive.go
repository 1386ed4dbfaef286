package resilience

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// TimeoutSetting is the value of a dependency's "timeout" key: a duration
// ("300ms") or "auto". It decodes from YAML and from text (JSON strings,
// flags), so the config layer can read the key into it and Apply it.
type TimeoutSetting struct {
	Auto  bool
	Fixed time.Duration // when not Auto
}

// ParseTimeoutSetting reads "auto" or a duration such as "300ms".
func ParseTimeoutSetting(s string) (TimeoutSetting, error) {
	if strings.EqualFold(strings.TrimSpace(s), "auto") {
		return TimeoutSetting{Auto: true}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return TimeoutSetting{}, fmt.Errorf(`must be a duration such as "300ms" or "auto", got %q`, s)
	}
	if d <= 0 {
		return TimeoutSetting{}, fmt.Errorf("must be positive, got %v", d)
	}
	return TimeoutSetting{Fixed: d}, nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *TimeoutSetting) UnmarshalText(b []byte) error {
	v, err := ParseTimeoutSetting(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// MarshalText writes "auto" or the duration.
func (t TimeoutSetting) MarshalText() ([]byte, error) {
	if t.Auto {
		return []byte("auto"), nil
	}
	return []byte(t.Fixed.String()), nil
}

// UnmarshalYAML reads a scalar through UnmarshalText (the yaml packages'
// callback form, so this package needs no yaml import).
func (t *TimeoutSetting) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return errors.New(`must be a duration such as "300ms" or "auto"`)
	}
	return t.UnmarshalText([]byte(s))
}

// Apply puts the setting into c: "auto" turns AutoTimeout on and keeps
// Timeout as the starting point (and, unless TimeoutMax is set, the
// ceiling); a duration sets Timeout and turns AutoTimeout off.
func (t TimeoutSetting) Apply(c *Config) {
	if t.Auto {
		c.AutoTimeout = true
		return
	}
	c.AutoTimeout, c.Timeout = false, t.Fixed
}

// TimeoutSetting is c's "timeout" key as a file would write it.
func (c Config) TimeoutSetting() TimeoutSetting {
	return TimeoutSetting{Auto: c.AutoTimeout, Fixed: c.Timeout}
}

// TimeoutChange reports an adaptive sub-budget moving.
type TimeoutChange struct {
	Dependency string
	From, To   time.Duration
	At         time.Time
	// Recommended is the rule's figure the change moves towards, from
	// Successes successful calls in the window.
	Recommended time.Duration
	Successes   int64
}

// TimeoutListener is implemented by a Listener that wants to hear about
// adaptive sub-budget changes (for the log and metrics). It is optional so
// that existing listeners need not change.
type TimeoutListener interface {
	OnTimeoutChange(c TimeoutChange)
}

// The adaptive sub-budget moves at most once per adaptEvery, only when the
// rule's figure is more than adaptDeadBand away (hysteresis: ordinary
// sampling noise does not move it), and by at most adaptStep of its value
// per move (smooth: a page sees a ramp, not a jump).
const (
	adaptEvery    = time.Second
	adaptDeadBand = 0.10
	adaptStep     = 0.25
)

// adapt moves the adaptive sub-budget one step towards the rule's figure
// from successful calls. It holds still while there are too few successes,
// while the breaker is not closed, and while failures and timeouts
// outnumber successes: a hang produces no successes and so can never raise
// it, and a sick dependency's few answers are no guide.
func (g *Guard) adapt(s *settings, now time.Time) {
	if now.UnixNano()-g.autoAt.Load() < int64(adaptEvery) || !g.autoMu.TryLock() {
		return
	}
	change := g.adaptLocked(s, now)
	g.autoMu.Unlock()
	if change != nil {
		if l, ok := g.listener.(TimeoutListener); ok {
			l.OnTimeoutChange(*change)
		}
	}
}

func (g *Guard) adaptLocked(s *settings, now time.Time) *TimeoutChange {
	if now.UnixNano()-g.autoAt.Load() < int64(adaptEvery) {
		return nil // someone else just did
	}
	g.autoAt.Store(now.UnixNano())
	if State(g.breaker.state.Load()) != StateClosed || Force(g.breaker.force.Load()) == ForceOpen {
		return nil
	}
	c := s.window.counts(now, time.Time{})
	if c[cFailure]+c[cTimeout] >= c[cSuccess] {
		return nil
	}
	p := s.window.histogram(now, true).percentiles()
	if p.Count < AdvisorMinSuccesses {
		return nil
	}
	cfg := &s.cfg
	lo, hi := g.autoBounds(cfg)
	target := min(max(RecommendTimeout(p, cfg.TimeoutMargin), lo), hi)
	cur := time.Duration(g.autoTO.Load())
	diff := target - cur
	// Successes are a sample censored at the sub-budget: while more calls
	// time out than the rule's target share, the slowest answers are
	// missing from it, so its tail reads low. Shrinking on that figure
	// would cut yet more calls; wait until timeouts are rare again.
	calls := c[cSuccess] + c[cFailure] + c[cTimeout]
	if diff < 0 && c[cTimeout]*1000 > calls {
		return nil
	}
	// A target pinned at a bound is not noise: go all the way to it.
	atBound := target == lo || target == hi
	if float64(max(diff, -diff)) <= adaptDeadBand*float64(cur) && !atBound {
		return nil
	}
	step := time.Duration(adaptStep * float64(cur))
	next := cur + min(max(diff, -step), step)
	next = min(max(next.Round(time.Millisecond), lo), hi)
	if next == cur {
		return nil
	}
	g.autoTO.Store(int64(next))
	return &TimeoutChange{Dependency: g.name, From: cur, To: next, At: now, Recommended: target, Successes: p.Count}
}
