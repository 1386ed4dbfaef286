package downstream

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config is one client's settings. Zero values mean the documented
// defaults, so only BaseURL is required.
type Config struct {
	// BaseURL of the service, http or https, optionally with a path prefix
	// (for example http://127.0.0.1:9100). Required.
	BaseURL string

	// MaxConns bounds the connections to the service (in use and idle). It
	// should be at least the dependency's bulkhead size, plus room for
	// hedges. Default 100: twice the default bulkhead of 50.
	MaxConns int

	// DialTimeout bounds connecting. Default 200ms: a loopback or in-cluster
	// connect takes well under a millisecond, so a slow connect means the
	// host is gone and retrying elsewhere beats waiting.
	DialTimeout time.Duration

	// Timeout caps one call, answer and body, for a caller whose deadline
	// is further away or who has none. The caller's deadline is what
	// normally ends a slow call (the guard's sub-budget, well under the
	// default), and then no timer of this client's own runs: a second timer
	// per call (http.Transport's ResponseHeaderTimeout, which this replaces)
	// cost ~1.5 µs of a page's CPU and never fired. Default 2s.
	Timeout time.Duration

	// MaxBodyBytes is the largest body accepted. Default 1 MiB; a real answer
	// is a few KiB.
	MaxBodyBytes int64

	// WrapTransport, when set, wraps the client's transport, for example
	// with OpenTelemetry's otelhttp.NewTransport; it gets the dependency's
	// name (API.Name: order, inventory, …). This package imports no
	// telemetry itself.
	WrapTransport func(dependency string, next http.RoundTripper) http.RoundTripper
}

// Defaults applied by WithDefaults.
const (
	DefaultMaxConns     = 100
	DefaultDialTimeout  = 200 * time.Millisecond
	DefaultTimeout      = 2 * time.Second
	DefaultMaxBodyBytes = 1 << 20
)

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return c
}

// Validate reports every invalid setting. Call it on WithDefaults' result.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if u, err := url.Parse(c.BaseURL); err != nil {
		bad("base URL %q: %v", c.BaseURL, err)
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("base URL %q: want http:// or https:// and a host", c.BaseURL)
	} else if u.RawQuery != "" || u.Fragment != "" {
		bad("base URL %q: must not have a query or fragment", c.BaseURL)
	}
	if c.MaxConns < 1 {
		bad("max conns must be at least 1, got %d", c.MaxConns)
	}
	if c.DialTimeout <= 0 {
		bad("dial timeout must be positive, got %v", c.DialTimeout)
	}
	if c.Timeout <= 0 {
		bad("timeout must be positive, got %v", c.Timeout)
	}
	if c.MaxBodyBytes < 1 {
		bad("max body bytes must be positive, got %d", c.MaxBodyBytes)
	}
	return errors.Join(errs...)
}

// newTransport builds the dependency's own transport. Proxies from the
// environment are ignored on purpose: downstreams are internal services, and
// an HTTP_PROXY meant for the outside world must not reroute them.
func newTransport(c Config) *http.Transport {
	d := &net.Dialer{Timeout: c.DialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:               nil,
		DialContext:         d.DialContext,
		ForceAttemptHTTP2:   true,
		MaxConnsPerHost:     c.MaxConns,
		MaxIdleConnsPerHost: c.MaxConns,
		MaxIdleConns:        c.MaxConns,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: time.Second,
	}
}

// trimBase removes trailing slashes so paths can be appended.
func trimBase(base string) string { return strings.TrimRight(base, "/") }
