package downstream

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Headers every request may carry.
const (
	HeaderBudget    = "X-Budget-Ms"
	HeaderRequestID = "X-Request-Id"
)

var (
	acceptJSON     = []string{"application/json"}
	userAgentValue = []string{userAgent}
)

const (
	userAgent = "orderagg"
	// drainLimit bounds how much of an unread body is discarded so that its
	// connection can be reused; beyond it the connection is closed instead.
	drainLimit = 64 << 10
	// errorBodyLimit bounds how much of an error answer is read for its code
	// and message.
	errorBodyLimit = 4 << 10
	// budgetExhausted is the error code of a 504 meaning "your X-Budget-Ms
	// ran out" (see internal/sim).
	budgetExhausted = "BUDGET_EXHAUSTED"
)

// Failure sentinels. Each counts against the dependency's health.
var (
	// ErrTransport: no usable answer arrived (refused or reset connection,
	// dial timeout or Config.Timeout, broken body).
	ErrTransport = errors.New("transport error")
	// ErrMalformed: a 200 answer that is not the expected JSON.
	ErrMalformed = errors.New("malformed response")
	// ErrBodyTooLarge: a 200 answer over Config.MaxBodyBytes.
	ErrBodyTooLarge = errors.New("response body too large")
)

// StatusError is an answer with a status other than 200. Code and Message
// come from the {"error":{"code","message"}} body when there is one.
type StatusError struct {
	Dependency string
	StatusCode int
	Code       string
	Message    string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s answered HTTP %d", e.Dependency, e.StatusCode)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// base is the HTTP plumbing of a client: one transport, one
// pool, one body cap.
type base struct {
	dep  string
	base *url.URL // parsed once, credentials removed; copied per request
	// auth is the Authorization header of a base URL with user:password,
	// sent as HTTP basic authentication; nil without.
	auth []string
	// rt sends each request as it is: a single round trip, no redirect
	// followed (a downstream that redirects is misconfigured, and following
	// it would spend the budget on a server nobody chose), and none of
	// http.Client's per-call bookkeeping (header copies for redirects,
	// cancellation timers) that a budgeted call already has from its context.
	rt      http.RoundTripper
	tr      *http.Transport
	maxBody int64
	timeout time.Duration // Config.Timeout
}

func newBase(dep string, c Config) (*base, error) {
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("downstream: %s client: %w", dep, err)
	}
	tr := newTransport(c)
	var rt http.RoundTripper = tr
	if c.WrapTransport != nil {
		rt = c.WrapTransport(dep, tr)
	}
	u, err := url.Parse(trimBase(c.BaseURL))
	if err != nil { // Validate has parsed it already
		return nil, fmt.Errorf("downstream: %s client: %w", dep, err)
	}
	b := &base{dep: dep, base: u, rt: rt, tr: tr, maxBody: c.MaxBodyBytes, timeout: c.Timeout}
	if u.User != nil {
		// As http.Client would: credentials in the URL become basic auth.
		pw, _ := u.User.Password()
		b.auth = []string{"Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw))}
		u.User = nil
	}
	return b, nil
}

// closeIdle closes the pool's idle connections; in-flight calls finish.
func (b *base) closeIdle() { b.tr.CloseIdleConnections() }

// errEmptyID is the caller's mistake, never the dependency's.
var errEmptyID = resilience.BadRequest(errors.New("empty order id"))

// get sends one GET and returns the body of a 200 answer. The body is always
// drained (bounded) and closed, so the connection goes back to the pool.
func (b *base) get(ctx context.Context, path string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// From here the call always has a deadline, and left is what remains
	// of it: the budget the request announces.
	dl, ok := ctx.Deadline()
	left := time.Until(dl)
	if !ok || left > b.timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, b.timeout, errCallTimeout)
		defer cancel()
		left = b.timeout
	}
	// The base URL was parsed once; copying it and setting the path skips
	// a parse per call, and URL escapes the path when the request is
	// written.
	unescaped, err := url.PathUnescape(path) // no copy unless path has a %
	if err != nil {
		return nil, resilience.BadRequest(fmt.Errorf("building request: %w", err))
	}
	u := *b.base
	u.Path, u.RawPath = b.base.Path+unescaped, ""
	if unescaped != path {
		u.RawPath = b.base.EscapedPath() + path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "", nil)
	if err != nil {
		return nil, resilience.BadRequest(fmt.Errorf("building request: %w", err))
	}
	req.URL, req.Host = &u, u.Host
	// Canonical keys set directly: the constant values are shared, not
	// copied per call (nothing downstream of here modifies a header value).
	req.Header["Accept"] = acceptJSON
	req.Header["User-Agent"] = userAgentValue
	req.Header[HeaderBudget] = []string{strconv.FormatInt(max(0, left.Milliseconds()), 10)}
	if id := RequestIDFrom(ctx); id != "" {
		req.Header[HeaderRequestID] = []string{id}
	}
	if b.auth != nil {
		req.Header["Authorization"] = b.auth
	}
	resp, err := b.rt.RoundTrip(req)
	if err != nil {
		return nil, ioErr(ctx, err)
	}
	defer drainAndClose(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, b.statusErr(resp)
	}
	if err := checkContentType(resp.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	return b.readBody(ctx, resp)
}

// errCallTimeout ends a call that reached Config.Timeout before the
// caller's own deadline: the dependency's failure, not the caller's.
var errCallTimeout = fmt.Errorf("%w: no answer within the client's timeout", ErrTransport)

// ioErr classifies an error of sending or reading. When the caller's
// context has ended, that is the cause. Otherwise it is the dependency's
// failure, and the cause is kept as text only: net's timeouts match
// context.DeadlineExceeded and would otherwise pass for the caller's
// deadline.
func ioErr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		if cause := context.Cause(ctx); cause == errCallTimeout {
			return fmt.Errorf("%w (%v)", cause, err)
		}
		if errors.Is(err, ctxErr) {
			return err
		}
		return fmt.Errorf("%w: %v", ctxErr, err)
	}
	return fmt.Errorf("%w: %v", ErrTransport, err)
}

// statusErr classifies an answer other than 200; see the package doc.
func (b *base) statusErr(resp *http.Response) error {
	se := &StatusError{Dependency: b.dep, StatusCode: resp.StatusCode}
	se.Code, se.Message = readErrorBody(resp.Body)
	code := resp.StatusCode
	switch {
	case code == http.StatusGatewayTimeout && se.Code == budgetExhausted:
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, se)
	case code == http.StatusNotFound:
		return resilience.BadRequest(fmt.Errorf("%w: %w", orderdetail.ErrNotFound, se))
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return resilience.BadRequest(se)
	default:
		return se
	}
}

// readErrorBody extracts code and message from a bounded prefix of an error
// body, if it is the usual {"error":{…}} document.
func readErrorBody(r io.Reader) (code, msg string) {
	raw, _ := io.ReadAll(io.LimitReader(r, errorBodyLimit))
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return "", ""
	}
	const maxMsg = 200
	if len(e.Error.Message) > maxMsg {
		e.Error.Message = e.Error.Message[:maxMsg] + "…"
	}
	return e.Error.Code, e.Error.Message
}

func checkContentType(ct string) error {
	// What a JSON service sends, taken without the parser's map and copies
	// (~1 µs a call).
	if ct == "application/json" || ct == "application/json; charset=utf-8" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return fmt.Errorf("%w: content type %q is not JSON", ErrMalformed, ct)
	}
	return nil
}

// readBody reads at most maxBody+1 bytes: one more than allowed is how a
// body over the cap is told from one exactly at it. Memory held never
// exceeds maxBody+1 bytes.
func (b *base) readBody(ctx context.Context, resp *http.Response) ([]byte, error) {
	limit := b.maxBody + 1
	if resp.ContentLength >= limit {
		return nil, fmt.Errorf("%w: Content-Length %d over the %d-byte cap", ErrBodyTooLarge, resp.ContentLength, b.maxBody)
	}
	size := int64(4 << 10)
	if resp.ContentLength >= 0 {
		size = resp.ContentLength + 1 // +1 so the final read meets EOF without growing
	}
	buf := make([]byte, 0, min(size, limit))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= limit {
				return nil, fmt.Errorf("%w: over the %d-byte cap", ErrBodyTooLarge, b.maxBody)
			}
			grown := make([]byte, len(buf), min(int64(2*cap(buf)+512), limit))
			copy(grown, buf)
			buf = grown
		}
		n, err := resp.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, ioErr(ctx, err)
		}
	}
	if int64(len(buf)) > b.maxBody {
		return nil, fmt.Errorf("%w: over the %d-byte cap", ErrBodyTooLarge, b.maxBody)
	}
	return buf, nil
}

func drainAndClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, drainLimit)
	_ = body.Close()
}
