package resilience

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// Config is one dependency's settings. A zero field means its default
// (WithDefaults, given after each field), so Config{} is a valid guard. The
// yaml names are the keys of the dependency's section of the --config file
// and of the admin API's PATCH body.
type Config struct {
	// Timeout is the sub-budget of one call, retries included, always cut
	// to the caller's deadline; 1s. Under AutoTimeout it is where the
	// adaptive sub-budget starts.
	Timeout  time.Duration  `yaml:"timeout" json:"timeout"`
	Bulkhead BulkheadConfig `yaml:"bulkhead" json:"bulkhead"`
	Breaker  BreakerConfig  `yaml:"breaker" json:"breaker"`
	Retry    RetryConfig    `yaml:"retry" json:"retry"`
	// FallbackTimeout bounds a fallback run after the call failed; 80ms.
	FallbackTimeout time.Duration `yaml:"fallback_timeout" json:"fallback_timeout"`
	// TimeoutMargin is added to max(3×P99, 2×P99.9) to recommend a timeout; 50ms.
	TimeoutMargin time.Duration `yaml:"timeout_margin" json:"timeout_margin"`
	// AutoTimeout ("timeout: auto" in a file) makes the sub-budget follow
	// the recommendation, between TimeoutMin (10ms) and TimeoutMax (0:
	// Timeout); off.
	AutoTimeout bool          `yaml:"-" json:"auto_timeout"`
	TimeoutMin  time.Duration `yaml:"timeout_min" json:"timeout_min"`
	TimeoutMax  time.Duration `yaml:"timeout_max" json:"timeout_max"`
}

// BulkheadConfig bounds the calls in flight to the dependency.
type BulkheadConfig struct {
	MaxConcurrent int `yaml:"max_concurrent" json:"max_concurrent"` // calls in flight; 50
}

// BreakerConfig sets the circuit breaker.
type BreakerConfig struct {
	Window      time.Duration `yaml:"window" json:"window"`             // the rolling window; 10s
	Buckets     int           `yaml:"buckets" json:"buckets"`           // of the window, each at least 10ms; 10
	MinRequests int           `yaml:"min_requests" json:"min_requests"` // calls in the window before its rates count; 20
	// ErrorPercent of failures and timeouts in the window opens it; 50.
	ErrorPercent float64 `yaml:"error_percent" json:"error_percent"`
	// ConsecutiveFailures (failures and timeouts with no answer between)
	// open it at once, whatever the window holds; 10.
	ConsecutiveFailures int `yaml:"consecutive_failures" json:"consecutive_failures"`
	// SleepWindow is how long it stays open before one probe; 500ms.
	SleepWindow time.Duration `yaml:"sleep_window" json:"sleep_window"`
}

// RetryConfig bounds the retries of failures.
type RetryConfig struct {
	// MaxAttempts per call, the first included; 1 disables retries; 2.
	MaxAttempts int `yaml:"max_attempts" json:"max_attempts"`
	// Backoff before the first retry, doubled before each further one up to
	// MaxBackoff (100ms); the wait is drawn from (0, backoff]; 10ms.
	Backoff    time.Duration `yaml:"backoff" json:"backoff"`
	MaxBackoff time.Duration `yaml:"max_backoff" json:"max_backoff"`
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Timeout = cmp.Or(c.Timeout, time.Second)
	c.FallbackTimeout = cmp.Or(c.FallbackTimeout, 80*time.Millisecond)
	c.TimeoutMargin = cmp.Or(c.TimeoutMargin, 50*time.Millisecond)
	c.TimeoutMin = cmp.Or(c.TimeoutMin, 10*time.Millisecond)
	c.Bulkhead.MaxConcurrent = cmp.Or(c.Bulkhead.MaxConcurrent, 50)
	c.Breaker.Window = cmp.Or(c.Breaker.Window, 10*time.Second)
	c.Breaker.Buckets = cmp.Or(c.Breaker.Buckets, 10)
	c.Breaker.MinRequests = cmp.Or(c.Breaker.MinRequests, 20)
	c.Breaker.ErrorPercent = cmp.Or(c.Breaker.ErrorPercent, 50)
	c.Breaker.ConsecutiveFailures = cmp.Or(c.Breaker.ConsecutiveFailures, 10)
	c.Breaker.SleepWindow = cmp.Or(c.Breaker.SleepWindow, 500*time.Millisecond)
	c.Retry.MaxAttempts = cmp.Or(c.Retry.MaxAttempts, 2)
	c.Retry.Backoff = cmp.Or(c.Retry.Backoff, 10*time.Millisecond)
	c.Retry.MaxBackoff = cmp.Or(c.Retry.MaxBackoff, 100*time.Millisecond)
	return c
}

// autoBounds are an adaptive sub-budget's limits: TimeoutMin and TimeoutMax.
func (c *Config) autoBounds() (lo, hi time.Duration) {
	return c.TimeoutMin, cmp.Or(c.TimeoutMax, c.Timeout)
}

// Validate reports every invalid setting, one "key: what is wrong" error
// each, joined. Call it on WithDefaults' result.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
		}
	}
	b, r := c.Breaker, c.Retry
	check(c.Timeout > 0, "timeout", "must be positive, got %v", c.Timeout)
	check(c.FallbackTimeout > 0, "fallback_timeout", "must be positive, got %v", c.FallbackTimeout)
	check(c.TimeoutMargin >= 0, "timeout_margin", "must not be negative, got %v", c.TimeoutMargin)
	check(c.TimeoutMin > 0, "timeout_min", "must be positive, got %v", c.TimeoutMin)
	check(c.TimeoutMax >= 0, "timeout_max", "must not be negative, got %v", c.TimeoutMax)
	lo, hi := c.autoBounds()
	check(c.TimeoutMax < 0 || !c.AutoTimeout || lo <= hi, "timeout_min", "must not exceed timeout_max (%v), got %v", hi, lo)
	check(c.Bulkhead.MaxConcurrent >= 1, "bulkhead.max_concurrent", "must be at least 1, got %d", c.Bulkhead.MaxConcurrent)
	check(b.Buckets >= 1 && b.Buckets <= 1000, "breaker.buckets", "must be 1..1000, got %d", b.Buckets)
	check(b.Buckets < 1 || b.Buckets > 1000 || b.Window >= 10*time.Millisecond*time.Duration(b.Buckets),
		"breaker.window", "must hold buckets of at least 10ms, got %v for %d buckets", b.Window, b.Buckets)
	check(b.MinRequests >= 1, "breaker.min_requests", "must be at least 1, got %d", b.MinRequests)
	check(b.ErrorPercent > 0 && b.ErrorPercent <= 100, "breaker.error_percent", "must be in (0, 100], got %v", b.ErrorPercent)
	check(b.SleepWindow > 0, "breaker.sleep_window", "must be positive, got %v", b.SleepWindow)
	check(b.ConsecutiveFailures >= 1, "breaker.consecutive_failures", "must be at least 1, got %d", b.ConsecutiveFailures)
	check(r.MaxAttempts >= 1 && r.MaxAttempts <= 10, "retry.max_attempts", "must be 1..10, got %d", r.MaxAttempts)
	check(r.Backoff >= 0, "retry.backoff", "must not be negative, got %v", r.Backoff)
	check(r.MaxBackoff >= r.Backoff, "retry.max_backoff", "must be at least retry.backoff (%v), got %v", r.Backoff, r.MaxBackoff)
	return errors.Join(errs...)
}
