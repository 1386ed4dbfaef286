package resilience

import (
	"errors"
	"fmt"
	"time"
)

// Config is one dependency's settings. The zero value of every field means
// its documented default, so Config{} is a valid, conservative guard.
// The yaml names are the keys of the dependency's section of the --config
// file and of the admin API's PATCH body.
type Config struct {
	// Timeout is the sub-budget of one call, retries and hedges included.
	// It is always clamped to the caller's remaining deadline. Default 1s.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`

	Bulkhead BulkheadConfig `yaml:"bulkhead" json:"bulkhead"`
	Breaker  BreakerConfig  `yaml:"breaker" json:"breaker"`
	Retry    RetryConfig    `yaml:"retry" json:"retry"`
	Hedge    HedgeConfig    `yaml:"hedge" json:"hedge"`

	// FallbackTimeout bounds a fallback (e.g. a last-good cache read) run
	// after the call failed; default 80ms: longer than a cache read's own
	// 50ms sub-budget, so a slow store times out in its own guard (where it
	// counts against the store) rather than being cut short here.
	FallbackTimeout time.Duration `yaml:"fallback_timeout" json:"fallback_timeout"`

	// TimeoutMargin is added to max(3×P99, 2×P99.9) to recommend a timeout.
	// Default 50ms (the background reading's 500ms is for multi-second pages;
	// ours has 1500ms in all).
	TimeoutMargin time.Duration `yaml:"timeout_margin" json:"timeout_margin"`

	// AutoTimeout (YAML "timeout: auto", see TimeoutSetting) makes the
	// sub-budget follow the recommendation, max(3×P99, 2×P99.9) + margin
	// over successful calls, between TimeoutMin and TimeoutMax. Timeout is
	// then where it starts. Off by default: opt in per dependency.
	AutoTimeout bool `yaml:"-" json:"auto_timeout"`
	// TimeoutMin is the least an adaptive sub-budget may shrink to; default
	// 10ms. Ignored unless AutoTimeout.
	TimeoutMin time.Duration `yaml:"timeout_min" json:"timeout_min"`
	// TimeoutMax is the most an adaptive sub-budget may grow to; default 0
	// means Timeout. It must leave the page's reserve (config checks it
	// against the deadline, as it does timeout). Ignored unless AutoTimeout.
	TimeoutMax time.Duration `yaml:"timeout_max" json:"timeout_max"`
}

// BulkheadConfig bounds concurrent calls to the dependency.
type BulkheadConfig struct {
	// MaxConcurrent calls in flight. Default 50 (Little's law: 250 req/s at a
	// 100ms tail, ×2 headroom).
	MaxConcurrent int `yaml:"max_concurrent" json:"max_concurrent"`
	// MaxQueue calls may wait for a slot; default 0: a full bulkhead rejects
	// at once (queues add latency, not throughput).
	MaxQueue int `yaml:"max_queue" json:"max_queue"`
	// MaxWait bounds a queued call's wait (and so does its deadline).
	// Default: the call's whole sub-budget.
	MaxWait time.Duration `yaml:"max_wait" json:"max_wait"`
}

// BreakerConfig sets the rolling-window circuit breaker.
type BreakerConfig struct {
	// Window is the rolling window's length; default 10s.
	Window time.Duration `yaml:"window" json:"window"`
	// Buckets the window is cut into; default 10. Must divide Window into
	// buckets of at least 10ms.
	Buckets int `yaml:"buckets" json:"buckets"`
	// MinRequests in the window before the breaker may open; default 20.
	MinRequests int `yaml:"min_requests" json:"min_requests"`
	// ErrorPercent (failures and timeouts over calls) that opens it; default 50.
	ErrorPercent float64 `yaml:"error_percent" json:"error_percent"`
	// SlowCallDuration: a call slower than this counts as slow. Default 0
	// means: the sub-budget's 80% (of the value in force under timeout: auto).
	SlowCallDuration time.Duration `yaml:"slow_call_duration" json:"slow_call_duration"`
	// SlowCallPercent of slow calls that opens it; default 0 means 100
	// (slow calls alone never open it unless every call is slow).
	SlowCallPercent float64 `yaml:"slow_call_percent" json:"slow_call_percent"`
	// ConsecutiveFailures in a row (failures and timeouts, no success in
	// between) open it at once, whatever the window holds; default 10. The
	// window alone is slow to see a hang: 10 s of healthy history must be
	// outvoted first. Ten in a row takes half a second at 20 calls/s, while
	// noise rarely strings ten together (5 % stalls: 0.05^10 ≈ 1e-13).
	ConsecutiveFailures int `yaml:"consecutive_failures" json:"consecutive_failures"`
	// SleepWindow is how long it stays open before the first probe; default
	// 500ms. Each failed probe doubles it, up to MaxSleepWindow, so a quick
	// blip recovers quickly and a long outage is not hammered.
	SleepWindow time.Duration `yaml:"sleep_window" json:"sleep_window"`
	// MaxSleepWindow caps the growing sleep window; default 5s. A
	// SleepWindow above it is kept as it is and does not grow (a file that
	// sets only sleep_window: 10s means what it says).
	MaxSleepWindow time.Duration `yaml:"max_sleep_window" json:"max_sleep_window"`
	// HalfOpenProbes admitted while half-open; all must succeed to close.
	// Default 1.
	HalfOpenProbes int `yaml:"half_open_probes" json:"half_open_probes"`
}

// RetryConfig bounds retries of failures worth retrying.
type RetryConfig struct {
	// MaxAttempts per call, the first one included; default 2. 1 disables retries.
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts"`
	// Backoff before the first retry, doubled before each further one up to
	// MaxBackoff; the wait is drawn uniformly from (0, backoff] (full jitter)
	// so callers do not retry in step. Default 10ms.
	Backoff time.Duration `yaml:"backoff" json:"backoff"`
	// MaxBackoff caps the backoff; default 100ms.
	MaxBackoff time.Duration `yaml:"max_backoff" json:"max_backoff"`
	// BudgetPercent: retries and hedges over the rolling window may be at most
	// this share of calls; default 20.
	BudgetPercent float64 `yaml:"budget_percent" json:"budget_percent"`
	// BudgetMin retries are always allowed in the window, so a quiet
	// dependency can still retry; default 10.
	BudgetMin int `yaml:"budget_min" json:"budget_min"`
}

// HedgeConfig sets hedged (backup) attempts.
type HedgeConfig struct {
	// Enabled turns hedging on; default off.
	Enabled bool `yaml:"enabled" json:"enabled"`
	// Percentile of observed latency after which a hedge starts; default 95.
	Percentile float64 `yaml:"percentile" json:"percentile"`
	// MinDelay is the least wait before hedging (and the wait while there is
	// no latency history yet); default 20ms.
	MinDelay time.Duration `yaml:"min_delay" json:"min_delay"`
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defInt := func(d *int, v int) {
		if *d == 0 {
			*d = v
		}
	}
	defF := func(d *float64, v float64) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Timeout, time.Second)
	def(&c.TimeoutMargin, 50*time.Millisecond)
	def(&c.FallbackTimeout, 80*time.Millisecond)
	def(&c.TimeoutMin, 10*time.Millisecond)
	defInt(&c.Bulkhead.MaxConcurrent, 50)
	def(&c.Breaker.Window, 10*time.Second)
	defInt(&c.Breaker.Buckets, 10)
	defInt(&c.Breaker.MinRequests, 20)
	defF(&c.Breaker.ErrorPercent, 50)
	defF(&c.Breaker.SlowCallPercent, 100)
	defInt(&c.Breaker.ConsecutiveFailures, 10)
	def(&c.Breaker.SleepWindow, 500*time.Millisecond)
	def(&c.Breaker.MaxSleepWindow, 5*time.Second)
	defInt(&c.Breaker.HalfOpenProbes, 1)
	defInt(&c.Retry.MaxAttempts, 2)
	def(&c.Retry.Backoff, 10*time.Millisecond)
	def(&c.Retry.MaxBackoff, 100*time.Millisecond)
	defF(&c.Retry.BudgetPercent, 20)
	defInt(&c.Retry.BudgetMin, 10)
	defF(&c.Hedge.Percentile, 95)
	def(&c.Hedge.MinDelay, 20*time.Millisecond)
	return c
}

// timeoutMax is the effective ceiling of an adaptive sub-budget.
func (c *Config) timeoutMax() time.Duration {
	if c.TimeoutMax > 0 {
		return c.TimeoutMax
	}
	return c.Timeout
}

// slowCallDuration is the effective slow-call threshold.
func (c *Config) slowCallDuration() time.Duration {
	if c.Breaker.SlowCallDuration > 0 {
		return c.Breaker.SlowCallDuration
	}
	return c.Timeout * 8 / 10
}

// Validate reports the first invalid setting, naming its config key. It
// checks the values after defaults, so call it on WithDefaults' result.
func (c Config) Validate() error {
	var errs []error
	bad := func(key string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	c.validateTimeouts(bad)
	c.Bulkhead.validate(bad)
	c.Breaker.validate(bad)
	c.Retry.validate(bad)
	c.Hedge.validate(bad)
	return errors.Join(errs...)
}

// complaint records one invalid setting: its config key and what is wrong.
type complaint func(key string, format string, args ...any)

func (c Config) validateTimeouts(bad complaint) {
	if c.Timeout <= 0 {
		bad("timeout", "must be positive, got %v", c.Timeout)
	}
	if c.FallbackTimeout <= 0 {
		bad("fallback_timeout", "must be positive, got %v", c.FallbackTimeout)
	}
	if c.TimeoutMargin < 0 {
		bad("timeout_margin", "must not be negative, got %v", c.TimeoutMargin)
	}
	if c.TimeoutMin <= 0 {
		bad("timeout_min", "must be positive, got %v", c.TimeoutMin)
	}
	if c.TimeoutMax < 0 {
		bad("timeout_max", "must not be negative, got %v", c.TimeoutMax)
	} else if c.AutoTimeout && c.TimeoutMin > c.timeoutMax() {
		bad("timeout_min", "must not exceed timeout_max (%v), got %v", c.timeoutMax(), c.TimeoutMin)
	}
}

func (c BulkheadConfig) validate(bad complaint) {
	if c.MaxConcurrent < 1 {
		bad("bulkhead.max_concurrent", "must be at least 1, got %d", c.MaxConcurrent)
	}
	if c.MaxQueue < 0 {
		bad("bulkhead.max_queue", "must not be negative, got %d", c.MaxQueue)
	}
	if c.MaxWait < 0 {
		bad("bulkhead.max_wait", "must not be negative, got %v", c.MaxWait)
	}
}

func (b BreakerConfig) validate(bad complaint) {
	if b.Buckets < 1 || b.Buckets > 1000 {
		bad("breaker.buckets", "must be 1..1000, got %d", b.Buckets)
	} else if b.Window < 10*time.Millisecond*time.Duration(b.Buckets) {
		bad("breaker.window", "must hold buckets of at least 10ms, got %v for %d buckets", b.Window, b.Buckets)
	}
	if b.MinRequests < 1 {
		bad("breaker.min_requests", "must be at least 1, got %d", b.MinRequests)
	}
	if b.ErrorPercent <= 0 || b.ErrorPercent > 100 {
		bad("breaker.error_percent", "must be in (0, 100], got %v", b.ErrorPercent)
	}
	if b.SlowCallPercent <= 0 || b.SlowCallPercent > 100 {
		bad("breaker.slow_call_percent", "must be in (0, 100], got %v", b.SlowCallPercent)
	}
	if b.SlowCallDuration < 0 {
		bad("breaker.slow_call_duration", "must not be negative, got %v", b.SlowCallDuration)
	}
	if b.SleepWindow <= 0 {
		bad("breaker.sleep_window", "must be positive, got %v", b.SleepWindow)
	}
	if b.ConsecutiveFailures < 1 {
		bad("breaker.consecutive_failures", "must be at least 1, got %d", b.ConsecutiveFailures)
	}
	if b.MaxSleepWindow <= 0 {
		bad("breaker.max_sleep_window", "must be positive, got %v", b.MaxSleepWindow)
	}
	if b.HalfOpenProbes < 1 {
		bad("breaker.half_open_probes", "must be at least 1, got %d", b.HalfOpenProbes)
	}
}

func (r RetryConfig) validate(bad complaint) {
	if r.MaxAttempts < 1 || r.MaxAttempts > 10 {
		bad("retry.max_attempts", "must be 1..10, got %d", r.MaxAttempts)
	}
	if r.Backoff < 0 {
		bad("retry.backoff", "must not be negative, got %v", r.Backoff)
	}
	if r.MaxBackoff < r.Backoff {
		bad("retry.max_backoff", "must be at least retry.backoff (%v), got %v", r.Backoff, r.MaxBackoff)
	}
	if r.BudgetPercent < 0 || r.BudgetPercent > 100 {
		bad("retry.budget_percent", "must be in [0, 100], got %v", r.BudgetPercent)
	}
	if r.BudgetMin < 0 {
		bad("retry.budget_min", "must not be negative, got %d", r.BudgetMin)
	}
}

func (h HedgeConfig) validate(bad complaint) {
	if h.Percentile <= 0 || h.Percentile >= 100 {
		bad("hedge.percentile", "must be in (0, 100), got %v", h.Percentile)
	}
	if h.MinDelay < 0 {
		bad("hedge.min_delay", "must not be negative, got %v", h.MinDelay)
	}
}
