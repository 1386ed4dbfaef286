// Package downstream holds the page's dependencies, one file each (answer
// type, API, semantic default and registry entry), the registry everything
// else derives from, and Client, which calls an API over net/http.
//
// Client.Get's errors, as resilience.KindOf reads them: a 404 wraps
// orderdetail.ErrNotFound and, like any 4xx but 408 and 429, is a
// resilience.BadRequest; the caller's context ending wraps ctx.Err(); a 504
// BUDGET_EXHAUSTED (the service gave up on X-Budget-Ms) wraps
// context.DeadlineExceeded. Anything else is a failure.
package downstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Headers a request carries: the whole milliseconds left of the call's
// budget, and the request's id (see WithRequestID).
const (
	HeaderBudget    = "X-Budget-Ms"
	HeaderRequestID = "X-Request-Id"
)

// Failures of the dependency, besides *StatusError.
var (
	ErrTransport    = errors.New("transport error")         // no usable answer: refused, reset, Config.Timeout
	ErrMalformed    = errors.New("malformed response")      // a 200 that is not the promised JSON
	ErrBodyTooLarge = errors.New("response body too large") // a 200 over Config.MaxBodyBytes
)

// StatusError is an answer other than 200, with the code and message of
// its {"error":{…}} body when it has one.
type StatusError struct {
	StatusCode    int
	Code, Message string
}

func (e *StatusError) Error() string {
	return strings.TrimRight(fmt.Sprintf("HTTP %d %s: %s", e.StatusCode, e.Code, e.Message), " :")
}

// Config is one client's settings; a zero field takes its default.
type Config struct {
	BaseURL      string        // http(s)://host[:port][/prefix], user:password as basic auth. Required.
	MaxIdleConns int           // idle connections kept (default 100); those in use are the guard's bulkhead's
	Timeout      time.Duration // caps a call whose caller has no nearer deadline (default 2s)
	MaxBodyBytes int64         // default 1 MiB
	// WrapTransport, when set, wraps the named dependency's transport.
	WrapTransport func(dependency string, next http.RoundTripper) http.RoundTripper
}

// Client calls one downstream API. It is safe for concurrent use.
type Client[T any] struct {
	name string
	api  API[T]
	c    Config // BaseURL without its trailing slashes, the defaults applied
	http *http.Client
	pool *http.Transport
}

// NewClient returns a client of the dependency name's api, with a
// connection pool of its own so that a dependency holding its connections
// cannot starve the others. It ignores environment proxies and answers a
// redirect as a failure.
func NewClient[T any](name string, api API[T], c Config) (*Client[T], error) {
	if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("downstream: %s: base URL %q: want http(s)://host and no query", name, c.BaseURL)
	}
	if !strings.Contains(api.Path, "{id}") || api.Check == nil {
		return nil, fmt.Errorf("downstream: %s: an API needs a path with {id} and a check", name)
	}
	c.BaseURL, c.Timeout, c.MaxBodyBytes = strings.TrimRight(c.BaseURL, "/"), cmp.Or(c.Timeout, 2*time.Second), cmp.Or(c.MaxBodyBytes, 1<<20)
	pool := http.DefaultTransport.(*http.Transport).Clone()
	pool.Proxy, pool.MaxIdleConns, pool.MaxIdleConnsPerHost = nil, cmp.Or(c.MaxIdleConns, 100), cmp.Or(c.MaxIdleConns, 100)
	pool.DialContext = (&net.Dialer{Timeout: 200 * time.Millisecond, KeepAlive: 30 * time.Second}).DialContext
	var rt http.RoundTripper = pool
	if c.WrapTransport != nil {
		rt = c.WrapTransport(name, pool)
	}
	// No http.Client.Timeout: the context bounds each call.
	return &Client[T]{name: name, api: api, c: c, pool: pool, http: &http.Client{Transport: rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

// Close closes idle connections; calls in flight go on.
func (c *Client[T]) Close() { c.pool.CloseIdleConnections() }

// Get fetches and checks orderID's answer; its errors: see the package doc.
func (c *Client[T]) Get(ctx context.Context, orderID string) (v T, err error) {
	body, err := c.get(ctx, orderID)
	if err == nil {
		v, err = c.api.read(body, orderID, true)
	}
	if err != nil {
		return v, fmt.Errorf("downstream: %s %s: %w", c.name, orderID, err)
	}
	return v, nil
}

// get sends one GET and returns the body of a 200 answer. The body is
// drained (bounded) and closed, so that the connection is reused.
func (c *Client[T]) get(ctx context.Context, orderID string) ([]byte, error) {
	if orderID == "" {
		return nil, resilience.BadRequest(errors.New("empty order id"))
	}
	now := time.Now()
	callCtx, dl := ctx, now.Add(c.c.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d // the caller's deadline is the nearer: no context of our own
	} else {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
	}
	path := strings.Replace(c.api.Path, "{id}", url.PathEscape(orderID), 1)
	req, err := http.NewRequestWithContext(callCtx, http.MethodGet, c.c.BaseURL+path, nil)
	if err != nil {
		return nil, resilience.BadRequest(err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(HeaderBudget, strconv.FormatInt(max(0, dl.Sub(now).Milliseconds()), 10))
	if id := RequestIDFrom(ctx); id != "" {
		req.Header.Set(HeaderRequestID, id)
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header)) // the caller's trace, traced or not
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, ioErr(ctx, err)
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10) // more: the connection is closed instead
		_ = resp.Body.Close()
	}()
	limit := c.c.MaxBodyBytes
	switch {
	case resp.StatusCode != http.StatusOK:
		return nil, statusErr(resp)
	case resp.ContentLength > limit:
		return nil, fmt.Errorf("%w: Content-Length %d over the %d-byte cap", ErrBodyTooLarge, resp.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%w: over the %d-byte cap", ErrBodyTooLarge, limit)
	} else if err != nil {
		return nil, ioErr(ctx, err)
	}
	return body, nil
}

// ioErr classifies an error of sending or reading: the caller's context's
// once it has ended, else ErrTransport, with the cause as text only
// (Config.Timeout and net's timeouts match context.DeadlineExceeded).
func ioErr(ctx context.Context, err error) error {
	return fmt.Errorf("%w: %v", cmp.Or(ctx.Err(), ErrTransport), err)
}

// statusErr classifies an answer other than 200; see the package doc.
func statusErr(resp *http.Response) error {
	se := &StatusError{}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_ = json.Unmarshal(raw, &struct{ Error *StatusError }{se}) // its code and message, if any
	se.StatusCode, se.Message = resp.StatusCode, se.Message[:min(len(se.Message), 200)]
	switch code := resp.StatusCode; {
	case code == http.StatusGatewayTimeout && se.Code == "BUDGET_EXHAUSTED":
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, se)
	case code == http.StatusNotFound:
		return resilience.BadRequest(fmt.Errorf("%w: %w", orderdetail.ErrNotFound, se))
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return resilience.BadRequest(se)
	}
	return se
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request's id, which every client
// forwards as X-Request-Id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id ctx carries, or "".
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}
