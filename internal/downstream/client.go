// Package downstream holds the page's dependencies, one file each (answer
// type, API, semantic default and registry entry), the registry everything
// else derives from, and Client, which calls an API over net/http.
//
// Client.Get's errors, as resilience.KindOf reads them: a 404 wraps
// orderdetail.ErrNotFound and, like any 4xx but 408 and 429, is a
// resilience.BadRequest. The caller's context ending wraps ctx.Err(); a 504
// BUDGET_EXHAUSTED (the service gave up on X-Budget-Ms) wraps
// context.DeadlineExceeded, a TIMEOUT. Anything else (*StatusError,
// ErrTransport, ErrMalformed, ErrBodyTooLarge) is a failure.
package downstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Headers a request may carry: the whole milliseconds left of the call's
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
	Dependency    string
	StatusCode    int
	Code, Message string
}

func (e *StatusError) Error() string {
	return strings.TrimRight(fmt.Sprintf("%s answered HTTP %d %s: %s", e.Dependency, e.StatusCode, e.Code, e.Message), " :")
}

// Config is one client's settings; a zero field takes its default.
type Config struct {
	BaseURL string // http(s)://host[:port][/prefix], user:password as basic auth. Required.
	// MaxIdleConns is how many idle connections are kept (default 100);
	// connections in use are bounded by the guard's bulkhead.
	MaxIdleConns int
	Timeout      time.Duration // caps a call whose caller has no nearer deadline (default 2s)
	MaxBodyBytes int64         // default 1 MiB
	// WrapTransport, when set, wraps the transport of the named dependency.
	WrapTransport func(dependency string, next http.RoundTripper) http.RoundTripper
}

// Client calls one downstream API. It is safe for concurrent use.
type Client[T any] struct {
	api     API[T]
	base    string // BaseURL without its trailing slashes
	http    *http.Client
	pool    *http.Transport
	timeout time.Duration
	maxBody int64
}

// NewClient returns a client of api with a connection pool of its own, so
// that a dependency holding its connections cannot starve the others. It
// ignores environment proxies and answers a redirect as a failure.
func NewClient[T any](api API[T], c Config) (*Client[T], error) {
	if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("downstream: %s client: base URL %q: want http(s)://host and no query", api.Name, c.BaseURL)
	}
	if api.Path == nil || api.Check == nil {
		return nil, fmt.Errorf("downstream: %s: an API needs a path and a check", api.Name)
	}
	idle := cmp.Or(c.MaxIdleConns, 100)
	pool := &http.Transport{
		DialContext:       (&net.Dialer{Timeout: 200 * time.Millisecond, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2: true, MaxIdleConns: idle, MaxIdleConnsPerHost: idle,
		IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: time.Second,
	}
	var rt http.RoundTripper = pool
	if c.WrapTransport != nil {
		rt = c.WrapTransport(api.Name, pool)
	}
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	// No http.Client.Timeout: the context bounds each call.
	return &Client[T]{api: api, base: strings.TrimRight(c.BaseURL, "/"), pool: pool, maxBody: cmp.Or(c.MaxBodyBytes, 1<<20),
		timeout: cmp.Or(c.Timeout, 2*time.Second), http: &http.Client{Transport: rt, CheckRedirect: noRedirect}}, nil
}

// Close closes idle connections; calls in flight go on.
func (c *Client[T]) Close() { c.pool.CloseIdleConnections() }

var errEmptyID = resilience.BadRequest(errors.New("empty order id"))

// Get fetches and checks orderID's answer; its errors: see the package doc.
func (c *Client[T]) Get(ctx context.Context, orderID string) (v T, err error) {
	var body []byte
	if orderID == "" {
		err = errEmptyID
	} else if body, err = c.get(ctx, c.api.Path(orderID)); err == nil {
		v, err = c.api.read(body, orderID, true)
	}
	if err != nil {
		return v, fmt.Errorf("downstream: %s %s: %w", c.api.Name, orderID, err)
	}
	return v, nil
}

// get sends one GET and returns the body of a 200 answer. The body is
// drained (bounded) and closed, so that the connection is reused.
func (c *Client[T]) get(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	callCtx, cancel := context.WithTimeout(ctx, c.timeout) // the nearer of the two deadlines
	defer cancel()
	dl, _ := callCtx.Deadline()
	req, err := http.NewRequestWithContext(callCtx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, resilience.BadRequest(err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(HeaderBudget, strconv.FormatInt(max(0, time.Until(dl).Milliseconds()), 10))
	if id := RequestIDFrom(ctx); id != "" {
		req.Header.Set(HeaderRequestID, id)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, ioErr(ctx, err)
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10) // more: the connection is closed instead
		_ = resp.Body.Close()
	}()
	ct := resp.Header.Get("Content-Type")
	mt, _, cterr := mime.ParseMediaType(ct)
	switch {
	case resp.StatusCode != http.StatusOK:
		return nil, c.statusErr(resp)
	case cterr != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")):
		return nil, fmt.Errorf("%w: content type %q is not JSON", ErrMalformed, ct)
	case resp.ContentLength > c.maxBody:
		return nil, fmt.Errorf("%w: Content-Length %d over the %d-byte cap", ErrBodyTooLarge, resp.ContentLength, c.maxBody)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return nil, ioErr(ctx, err)
	}
	if int64(len(body)) > c.maxBody {
		return nil, fmt.Errorf("%w: over the %d-byte cap", ErrBodyTooLarge, c.maxBody)
	}
	return body, nil
}

// ioErr classifies an error of sending or reading: the caller's context's
// once it has ended, else the dependency's with the cause as text only
// (Config.Timeout and net's timeouts match context.DeadlineExceeded).
func ioErr(ctx context.Context, err error) error {
	switch ctxErr := ctx.Err(); {
	case ctxErr == nil:
		return fmt.Errorf("%w: %v", ErrTransport, err)
	case errors.Is(err, ctxErr):
		return err
	default:
		return fmt.Errorf("%w: %v", ctxErr, err)
	}
}

// statusErr classifies an answer other than 200; see the package doc.
func (c *Client[T]) statusErr(resp *http.Response) error {
	se := &StatusError{Dependency: c.api.Name, StatusCode: resp.StatusCode}
	var e struct {
		Error struct{ Code, Message string }
	}
	if raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10)); json.Unmarshal(raw, &e) == nil {
		se.Code, se.Message = e.Error.Code, e.Error.Message[:min(len(e.Error.Message), 200)]
	}
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
