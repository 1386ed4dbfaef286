package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// plan is one run's shape.
type plan struct {
	// Rate > 0: open loop at Rate requests per second. 0: closed loop of
	// Concurrency workers.
	Rate        float64
	Concurrency int
	Warmup      time.Duration
	Duration    time.Duration
	// MaxRequests bounds the measured requests; the warm-up is bounded by
	// its duration.
	MaxRequests int64
	IDs         int
	// IDOffset starts the ids further on (o-(offset+1) first), so that a
	// scenario can give each round orders no earlier round has seen.
	IDOffset uint64
	Timeout  time.Duration
}

func (p plan) mode() string {
	if p.Rate > 0 {
		return fmt.Sprintf("open loop, %g req/s", p.Rate)
	}
	return fmt.Sprintf("closed loop, %d workers", p.Concurrency)
}

// maxBody bounds how much of an answer is read. A contract page is a few
// KiB; anything longer is read no further and fails to parse (bad_bodies).
const maxBody = 1 << 20

// target is where requests go, and the client that sends them.
type target struct {
	base   string // ends in "/v1/orders/"
	client *http.Client
}

// newTarget builds the client for a run against rawURL. Unless remote is
// allowed, the dialer refuses any connection whose resolved address is not
// loopback: checking the name up front is not enough, since DNS may answer
// differently at dial time.
func newTarget(rawURL string, idle int, remote bool) *target {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if !remote {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return fmt.Errorf("%w: %s", errNotLoopback, host)
			}
			return nil
		}
	}
	tr := &http.Transport{
		Proxy:               nil, // a proxy would make "loopback only" meaningless
		DialContext:         d.DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		TLSHandshakeTimeout: 5 * time.Second,
	}
	return &target{
		base: strings.TrimSuffix(rawURL, "/") + "/v1/orders/",
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

func (t *target) close() { t.client.CloseIdleConnections() }

var errNotLoopback = errors.New("not a loopback address")

// do sends one request for order id and reports the outcome; due is when
// it was meant to leave. A request cancelled because the whole run was
// cancelled returns ok false and must not be recorded.
func (t *target) do(ctx context.Context, id string, due time.Time, timeout time.Duration) (res result, ok bool) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res.start = due
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, t.base+id, nil)
	if err != nil {
		res.errKind, res.latency = "other", time.Since(due)
		return res, true
	}
	req.Header.Set("User-Agent", "orderagg-loadtest")
	resp, err := t.client.Do(req)
	if err == nil {
		var body []byte
		if resp.StatusCode == http.StatusOK {
			body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
		} else {
			_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		}
		resp.Body.Close()
		if err == nil {
			res.status, res.body = resp.StatusCode, body
		}
	}
	res.latency = time.Since(due)
	if err != nil {
		if ctx.Err() != nil {
			return res, false
		}
		res.errKind = errKind(err)
	}
	return res, true
}

// errKind names why a request got no answer.
func errKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "reset"
	case errors.Is(err, errNotLoopback):
		return "not_loopback"
	}
	return "other"
}

// orderID returns the n-th id of the spread o-1 … o-ids.
func orderID(n uint64, ids int) string {
	return "o-" + strconv.FormatUint(n%uint64(ids)+1, 10)
}

// runStats says how long a run measured and how much it sent.
type runStats struct {
	// Window is the measured window: from the end of the warm-up until the
	// last measured request left (the end of the duration, or earlier if
	// MaxRequests was reached or ctx ended).
	Window time.Duration
	// Sent counts every request sent, the warm-up's included.
	Sent int64
	// CPU is the process's CPU time over the run, when the caller measured
	// it (the experiments, where everything under test shares the process).
	CPU time.Duration
}

// run drives load at t according to p and adds the measured results to rec.
// Requests in flight when the window closes are waited for (each is bounded
// by p.Timeout) and recorded; if ctx ends they are cancelled instead and not
// recorded. progress, if not nil, is called once a second with the time
// since the start. Every goroutine run starts has ended when it returns.
func run(ctx context.Context, t *target, p plan, rec *recorder, progress func(elapsed time.Duration)) runStats {
	r := newLoadRun(t, p, rec)
	timer := time.AfterFunc(time.Until(r.end), func() { r.halt(r.end) })
	defer timer.Stop()
	cancelWatch := context.AfterFunc(ctx, func() { r.halt(time.Now()) })
	defer cancelWatch()
	waitProgress := r.reportProgress(progress)

	if p.Rate > 0 {
		r.openLoop(ctx)
	} else {
		r.closedLoop(ctx)
	}
	<-r.stop
	r.wg.Wait()
	waitProgress()
	st := runStats{Sent: int64(r.seq.Load())}
	if stopped := time.Unix(0, r.stoppedAt.Load()); stopped.After(r.warmEnd) {
		st.Window = stopped.Sub(r.warmEnd)
	}
	return st
}

// loadRun is the state of one run: its schedule, when it stopped and the
// requests it started.
type loadRun struct {
	t   *target
	p   plan
	rec *recorder

	start, warmEnd, end time.Time
	// stop is closed when no more requests may start.
	stop      chan struct{}
	stopOnce  sync.Once
	stoppedAt atomic.Int64 // unix ns, set once

	seq      atomic.Uint64 // ids
	measured atomic.Int64  // measured requests started
	wg       sync.WaitGroup
}

func newLoadRun(t *target, p plan, rec *recorder) *loadRun {
	r := &loadRun{t: t, p: p, rec: rec, start: time.Now(), stop: make(chan struct{})}
	r.warmEnd = r.start.Add(p.Warmup)
	r.end = r.warmEnd.Add(p.Duration)
	return r
}

// halt stops the run as of at; only the first call counts.
func (r *loadRun) halt(at time.Time) {
	r.stopOnce.Do(func() {
		r.stoppedAt.Store(at.UnixNano())
		close(r.stop)
	})
}

// reportProgress calls progress, if not nil, once a second until the run
// stops; the returned func waits for the goroutine that does it.
func (r *loadRun) reportProgress(progress func(elapsed time.Duration)) (wait func()) {
	var wg sync.WaitGroup
	if progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-r.stop:
					return
				case <-tick.C:
					progress(time.Since(r.start))
				}
			}
		}()
	}
	return wg.Wait
}

// admit reports whether a request due at due may start and whether it is
// measured.
func (r *loadRun) admit(due time.Time) (ok, measure bool) {
	select {
	case <-r.stop:
		return false, false
	default:
	}
	if !due.Before(r.end) {
		r.halt(r.end)
		return false, false
	}
	if due.Before(r.warmEnd) {
		return true, false
	}
	if r.measured.Add(1) > r.p.MaxRequests {
		r.halt(due)
		return false, false
	}
	return true, true
}

func (r *loadRun) send(ctx context.Context, due time.Time, measure bool) {
	res, ok := r.t.do(ctx, orderID(r.seq.Add(1)-1+r.p.IDOffset, r.p.IDs), due, r.p.Timeout)
	if ok && measure {
		r.rec.add(res)
	}
}

// openLoop starts request i at start + i/rate whatever happened to the
// others, each on its own goroutine; in flight is bounded by rate ×
// timeout. When the pacer falls behind, the late requests leave at once and
// their latency counts from when they were due.
func (r *loadRun) openLoop(ctx context.Context) {
	interval := float64(time.Second) / r.p.Rate
	wait := time.NewTimer(0)
	defer wait.Stop()
	for i := 0; ; i++ {
		due := r.start.Add(time.Duration(float64(i) * interval))
		if d := time.Until(due); d > 0 {
			wait.Reset(d)
			select {
			case <-r.stop:
				return
			case <-wait.C:
			}
		}
		ok, measure := r.admit(due)
		if !ok {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.send(ctx, due, measure)
		}()
	}
}

// closedLoop keeps p.Concurrency workers each sending its next request as
// soon as the last is answered.
func (r *loadRun) closedLoop(ctx context.Context) {
	for range r.p.Concurrency {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for {
				due := time.Now()
				ok, measure := r.admit(due)
				if !ok {
					return
				}
				r.send(ctx, due, measure)
			}
		}()
	}
}

// checkLoopback refuses a URL whose host is not a loopback address: a
// literal IP must be loopback, "localhost" is, and any other name must
// resolve only to loopback addresses. The dialer checks again at connect
// time (see newTarget).
func checkLoopback(ctx context.Context, u *url.URL) error {
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return fmt.Errorf("%w: %s", errNotLoopback, host)
		}
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(rctx, host)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", host, err)
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return fmt.Errorf("%w: %s resolves to %s", errNotLoopback, host, a.IP)
		}
	}
	return nil
}

// isTerminal reports whether w is a terminal, for the live progress line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
