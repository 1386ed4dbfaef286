package resilience

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type recorder struct {
	mu       sync.Mutex
	events   []Event
	changes  []StateChange
	timeouts []TimeoutChange
	onState  func(StateChange)
}

func (r *recorder) OnTimeoutChange(c TimeoutChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timeouts = append(r.timeouts, c)
}

func (r *recorder) OnEvent(_ context.Context, e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) OnStateChange(c StateChange) {
	r.mu.Lock()
	r.changes = append(r.changes, c)
	f := r.onState
	r.mu.Unlock()
	if f != nil {
		f(c)
	}
}

func (r *recorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.events))
	for i, e := range r.events {
		out[i] = e.Name()
	}
	return out
}

func (r *recorder) transitions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.changes))
	for i, c := range r.changes {
		out[i] = c.From.String() + ">" + c.To.String()
	}
	return out
}

func mustGuard(t *testing.T, cfg Config, opts ...Option) *Guard {
	t.Helper()
	g, err := New("dep", cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var errBoom = errors.New("boom")

func ok(context.Context) (string, error)   { return "ok", nil }
func fail(context.Context) (string, error) { return "", errBoom }
func badReq(context.Context) (string, error) {
	return "", BadRequest(errors.New("no such order"))
}

func TestKinds(t *testing.T) {
	clk := newFakeClock()
	answerLate := func(ctx context.Context) (string, error) {
		clk.Advance(5 * time.Millisecond)
		<-ctx.Done()
		return "late", nil
	}
	tests := []struct {
		name string
		cfg  Config
		ctx  func() (context.Context, context.CancelFunc)
		fn   func(context.Context) (string, error)
		want Kind
		is   error
	}{
		{"success", Config{}, bg, ok, KindSuccess, nil},
		{"failure", Config{Retry: RetryConfig{MaxAttempts: 1}}, bg, fail, KindFailure, ErrFailure},
		{"bad request", Config{}, bg, badReq, KindBadRequest, ErrBadRequest},
		{"sub-budget timeout", Config{Timeout: 5 * time.Millisecond}, bg, hang(clk, 5*time.Millisecond), KindTimeout, ErrTimeout},
		{"caller's deadline", Config{Timeout: time.Hour}, func() (context.Context, context.CancelFunc) { return withDeadline(clk, 5*time.Millisecond) },
			hang(clk, 5*time.Millisecond), KindDeadline, ErrDeadline},
		{"caller's deadline equal to the sub-budget", Config{Timeout: 5 * time.Millisecond}, func() (context.Context, context.CancelFunc) { return withDeadline(clk, 5*time.Millisecond) },
			hang(clk, 5*time.Millisecond), KindDeadline, ErrDeadline},
		{"no budget left", Config{}, func() (context.Context, context.CancelFunc) { return withDeadline(clk, -time.Second) }, ok, KindDeadline, ErrDeadline},
		{"answer after budget", Config{Timeout: 5 * time.Millisecond}, bg, answerLate, KindTimeout, ErrTimeout},
		{"fn's own deadline error", Config{}, bg, func(context.Context) (string, error) {
			return "", fmt.Errorf("client: %w", context.DeadlineExceeded)
		}, KindTimeout, ErrTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			g := mustGuard(t, tc.cfg, WithClock(clk), WithListener(rec))
			ctx, cancel := tc.ctx()
			defer cancel()
			v, err := Do(ctx, g, tc.fn)
			if got := KindOf(err); got != tc.want {
				t.Fatalf("kind = %v, want %v (err %v)", got, tc.want, err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("errors.Is(%v, %v) = false", err, tc.is)
			}
			if tc.want == KindSuccess && v != "ok" {
				t.Fatalf("value = %q", v)
			}
			if tc.want != KindSuccess && v != "" {
				t.Fatalf("a failed call returned value %q", v)
			}
			if names := rec.names(); names[len(names)-1] != tc.want.String() {
				t.Fatalf("events %v, want last %v", names, tc.want)
			}
		})
	}
}

func bg() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }

func inUse(g *Guard) int { return int(g.inUse.Load()) }

func TestErrorWrapsCause(t *testing.T) {
	g := mustGuard(t, Config{Retry: RetryConfig{MaxAttempts: 1}})
	_, err := Do(context.Background(), g, fail)
	if !errors.Is(err, errBoom) || !errors.Is(err, ErrFailure) {
		t.Fatalf("err %v should wrap both the cause and ErrFailure", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Dependency != "dep" {
		t.Fatalf("err = %#v", err)
	}
}

func breakerCfg() Config {
	return Config{
		Breaker: BreakerConfig{MinRequests: 4, ErrorPercent: 50, SleepWindow: 5 * time.Second},
		Retry:   RetryConfig{MaxAttempts: 1},
	}
}

func TestBreakerOpensOnErrorRateAndRecoversThroughHalfOpen(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{}
	g := mustGuard(t, breakerCfg(), WithClock(clk), WithListener(rec))
	ctx := context.Background()

	// Below the minimum volume nothing opens, whatever the rate.
	for range 3 {
		Do(ctx, g, fail)
	}
	if s := g.breaker.reported(); s != StateClosed {
		t.Fatalf("opened below min volume: %v", s)
	}
	Do(ctx, g, fail) // 4 calls, 100% errors
	if s := g.breaker.reported(); s != StateOpen {
		t.Fatalf("state = %v, want OPEN", s)
	}
	calls := 0
	counting := func(context.Context) (string, error) { calls++; return "ok", nil }
	if _, err := Do(ctx, g, counting); !errors.Is(err, ErrShortCircuited) || calls != 0 {
		t.Fatalf("open breaker let a call through: err %v calls %d", err, calls)
	}

	clk.Advance(5 * time.Second)
	// Half-open: one probe admitted, the next is short-circuited while it runs.
	release := make(chan struct{})
	started := make(chan struct{})
	probe := func(context.Context) (string, error) { close(started); <-release; return "ok", nil }
	var wg sync.WaitGroup
	wg.Go(func() { Do(ctx, g, probe) })
	<-started
	if s := g.breaker.reported(); s != StateHalfOpen {
		t.Fatalf("state = %v, want HALF_OPEN", s)
	}
	if _, err := Do(ctx, g, counting); !errors.Is(err, ErrShortCircuited) || calls != 0 {
		t.Fatalf("half-open admitted a second probe: %v", err)
	}
	close(release)
	wg.Wait()
	if s := g.breaker.reported(); s != StateClosed {
		t.Fatalf("state = %v after a good probe, want CLOSED", s)
	}
	// The failures before the close no longer count.
	Do(ctx, g, fail)
	if s := g.breaker.reported(); s != StateClosed {
		t.Fatalf("old failures re-opened the breaker")
	}
	want := []string{"CLOSED>OPEN", "OPEN>HALF_OPEN", "HALF_OPEN>CLOSED"}
	if got := rec.transitions(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
}

func TestBreakerFailedProbeReopens(t *testing.T) {
	clk := newFakeClock()
	g := mustGuard(t, breakerCfg(), WithClock(clk))
	ctx := context.Background()
	for range 4 {
		Do(ctx, g, fail)
	}
	clk.Advance(5 * time.Second)
	if _, err := Do(ctx, g, fail); !errors.Is(err, ErrFailure) {
		t.Fatalf("probe err %v", err)
	}
	if s := g.breaker.reported(); s != StateOpen {
		t.Fatalf("state %v, want OPEN after a failed probe", s)
	}
	// And it waits a full sleep window again.
	clk.Advance(4 * time.Second)
	if _, err := Do(ctx, g, ok); !errors.Is(err, ErrShortCircuited) {
		t.Fatalf("re-opened breaker let a call through before its sleep window: %v", err)
	}
}

func TestBreakerIgnoresBadRequestsAndCallerCancellation(t *testing.T) {
	clk := newFakeClock()
	g := mustGuard(t, breakerCfg(), WithClock(clk))
	for range 10 {
		Do(context.Background(), g, badReq)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 10 {
		Do(cctx, g, fail)
	}
	if s := g.breaker.reported(); s != StateClosed {
		t.Fatalf("bad requests or cancellations opened the breaker: %v", s)
	}
}

func TestBreakerWindowForgets(t *testing.T) {
	clk := newFakeClock()
	g := mustGuard(t, breakerCfg(), WithClock(clk))
	for range 3 {
		Do(context.Background(), g, fail)
	}
	clk.Advance(11 * time.Second) // the 10 s window has rolled past them
	Do(context.Background(), g, fail)
	if s := g.breaker.reported(); s != StateClosed {
		t.Fatalf("failures outside the window counted: %v", s)
	}
}

func TestForceBreaker(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{}
	g := mustGuard(t, breakerCfg(), WithClock(clk), WithListener(rec))
	g.ForceBreaker(ForceOpen)
	if _, err := Do(context.Background(), g, ok); !errors.Is(err, ErrShortCircuited) {
		t.Fatalf("forced open: %v", err)
	}
	g.ForceBreaker(ForceClosed)
	for range 10 {
		Do(context.Background(), g, fail)
	}
	if _, err := Do(context.Background(), g, ok); err != nil {
		t.Fatalf("forced closed short-circuited: %v", err)
	}
	g.ForceBreaker(ForceNone)
	// Automatic again: the failures seen while forced closed open it.
	Do(context.Background(), g, fail)
	if s := g.breaker.reported(); s != StateOpen {
		t.Fatalf("state %v, want OPEN", s)
	}
	want := []string{"CLOSED>FORCED_OPEN", "FORCED_OPEN>FORCED_CLOSED", "FORCED_CLOSED>CLOSED", "CLOSED>OPEN"}
	if got := rec.transitions(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
}

func TestListenerMayReadGuardOnStateChange(t *testing.T) {
	// Callbacks run outside the breaker's lock: reading the guard from one
	// must not deadlock.
	clk := newFakeClock()
	rec := &recorder{}
	g := mustGuard(t, breakerCfg(), WithClock(clk), WithListener(rec))
	var snaps []Snapshot
	rec.onState = func(StateChange) { snaps = append(snaps, g.Snapshot()) }
	for range 4 {
		Do(context.Background(), g, fail)
	}
	if len(snaps) != 1 || snaps[0].Breaker != StateOpen {
		t.Fatalf("snapshots %+v", snaps)
	}
}

func TestBulkheadRejectsAtOnceWhenFull(t *testing.T) {
	g := mustGuard(t, Config{Bulkhead: BulkheadConfig{MaxConcurrent: 2}})
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	hold := func(context.Context) (string, error) { started <- struct{}{}; <-release; return "ok", nil }
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { Do(context.Background(), g, hold) })
	}
	<-started
	<-started
	if _, err := Do(context.Background(), g, ok); !errors.Is(err, ErrRejected) {
		t.Fatalf("third call: %v, want rejected", err)
	}
	close(release)
	wg.Wait()
	if _, err := Do(context.Background(), g, ok); err != nil {
		t.Fatalf("after release: %v", err)
	}
	if n := int64(inUse(g)); n != 0 {
		t.Fatalf("in use %d after all returned", n)
	}
}

// waitFor polls a condition another goroutine makes true; it bounds the wait
// so a broken guard fails the test instead of hanging it.
func waitFor(t interface{ Fatal(...any) }, cond func() bool) {
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			if t == nil {
				panic("condition not reached")
			}
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestTimedOutCallKeepsItsSlotUntilItReturns(t *testing.T) {
	g := mustGuard(t, Config{Timeout: 5 * time.Millisecond, Bulkhead: BulkheadConfig{MaxConcurrent: 1}})
	// fn ignores the cancellation for a while: the slot must stay taken.
	unblock := make(chan struct{})
	expired := make(chan struct{})
	var inUseDuring int64
	done := make(chan error, 1)
	go func() {
		_, err := Do(context.Background(), g, func(ctx context.Context) (string, error) {
			<-ctx.Done()
			close(expired) // the 5 ms sub-budget is spent
			<-unblock
			return "", ctx.Err()
		})
		done <- err
	}()
	<-expired
	inUseDuring = int64(inUse(g))
	if _, err := Do(context.Background(), g, ok); !errors.Is(err, ErrRejected) {
		t.Fatalf("second call got a slot held by unfinished work: %v", err)
	}
	close(unblock)
	if err := <-done; !errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v", err)
	}
	if inUseDuring != 1 {
		t.Fatalf("in use %d while work unwinds", inUseDuring)
	}
}

func TestRetry(t *testing.T) {
	clk := newFakeClock()
	clk.auto = true
	rec := &recorder{}
	g := mustGuard(t, Config{Retry: RetryConfig{MaxAttempts: 3}}, WithClock(clk), WithListener(rec))
	n := 0
	flaky := func(context.Context) (string, error) {
		n++
		if n < 3 {
			return "", errBoom
		}
		return "ok", nil
	}
	if v, err := Do(context.Background(), g, flaky); err != nil || v != "ok" {
		t.Fatalf("v %q err %v", v, err)
	}
	if got := fmt.Sprint(rec.names()); got != "[failure failure success]" {
		t.Fatalf("events %s", got)
	}
	// Bad requests and timeouts are not retried.
	n = 0
	Do(context.Background(), g, func(ctx context.Context) (string, error) { n++; return badReq(ctx) })
	if n != 1 {
		t.Fatalf("bad request retried: %d attempts", n)
	}
}

func TestRetryStopsWhenBudgetCannotHoldAnAttempt(t *testing.T) {
	clk := newFakeClock()
	clk.auto = true
	g := mustGuard(t, Config{Retry: RetryConfig{MaxAttempts: 3, Backoff: time.Millisecond, MaxBackoff: time.Millisecond}}, WithClock(clk))
	// Teach the guard that an attempt typically takes 300 ms.
	slow := func(context.Context) (string, error) { clk.Advance(300 * time.Millisecond); return "ok", nil }
	for range 5 {
		Do(context.Background(), g, slow)
	}
	ctx, cancel := withDeadline(clk, 100*time.Millisecond)
	defer cancel()
	n := 0
	Do(ctx, g, func(context.Context) (string, error) { n++; return "", errBoom })
	if n != 1 {
		t.Fatalf("retried with 100 ms left for a 300 ms dependency: %d attempts", n)
	}
}

func TestNoRetryWhileBreakerOpen(t *testing.T) {
	clk := newFakeClock()
	clk.auto = true
	cfg := breakerCfg()
	cfg.Retry.MaxAttempts = 3
	cfg.Breaker.MinRequests = 1
	g := mustGuard(t, cfg, WithClock(clk))
	n := 0
	Do(context.Background(), g, func(context.Context) (string, error) { n++; return "", errBoom })
	if n != 1 {
		t.Fatalf("retried after the breaker opened: %d attempts", n)
	}
}

func TestFallbackEvents(t *testing.T) {
	rec := &recorder{}
	g := mustGuard(t, Config{FallbackTimeout: 5 * time.Millisecond}, WithListener(rec))
	v, err := Fallback(context.Background(), g, errBoom, func(_ context.Context, cause error) (string, error) {
		if !errors.Is(cause, errBoom) {
			t.Errorf("cause %v", cause)
		}
		return "cached", nil
	})
	if err != nil || v != "cached" {
		t.Fatalf("v %q err %v", v, err)
	}
	_, err = Fallback(context.Background(), g, errBoom, func(ctx context.Context, _ error) (string, error) {
		<-ctx.Done() // bounded by FallbackTimeout
		return "", ctx.Err()
	})
	if err == nil {
		t.Fatal("hung fallback succeeded")
	}
	if got := fmt.Sprint(rec.names()); got != "[fallback_success fallback_failure]" {
		t.Fatalf("events %s", got)
	}
}

func TestReconfigureWhileInFlight(t *testing.T) {
	g := mustGuard(t, Config{Bulkhead: BulkheadConfig{MaxConcurrent: 1}})
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := Do(context.Background(), g, func(context.Context) (string, error) { close(started); <-release; return "ok", nil })
		done <- err
	}()
	<-started
	if err := g.Reconfigure(Config{Bulkhead: BulkheadConfig{MaxConcurrent: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Do(context.Background(), g, ok); err != nil {
		t.Fatalf("new capacity not in force: %v", err)
	}
	bad := Config{Breaker: BreakerConfig{ErrorPercent: 200}}
	if err := g.Reconfigure(bad); err == nil {
		t.Fatal("invalid config accepted")
	}
	if g.cur.Load().cfg.Bulkhead.MaxConcurrent != 2 {
		t.Fatal("invalid config changed the settings")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// feed settles n attempts of the given kind and latency as if they had
// just finished, the way Do does: the advisor tests need thousands of calls
// inside one window, which a sequential fake clock could not fit.
func feed(g *Guard, n int, kind Kind, lat time.Duration) {
	c := &call{g: g, s: g.cur.Load(), ctx: context.Background(), span: noSpan}
	for range n {
		end := g.clock.Now()
		c.settle(Event{Dependency: g.name, Attempt: 1, Start: end.Add(-lat), Duration: lat, Kind: kind})
	}
}

// healthyBaseline: 1000 calls, 99 % at 20 ms and a 1 % tail at 40 ms.
func healthyBaseline(g *Guard) {
	feed(g, 990, KindSuccess, 20*time.Millisecond)
	feed(g, 10, KindSuccess, 40*time.Millisecond)
}

func TestAdvisor(t *testing.T) {
	logistics := Config{Timeout: 500 * time.Millisecond}

	t.Run("healthy baseline", func(t *testing.T) {
		g := mustGuard(t, logistics, WithClock(newFakeClock()))
		feed(g, AdvisorMinSuccesses-1, KindSuccess, 20*time.Millisecond)
		if s := g.Snapshot(); s.RecommendedTimeout != nil {
			t.Fatalf("%d successes: recommended %v; want none yet", AdvisorMinSuccesses-1, dur(s.RecommendedTimeout))
		}
		healthyBaseline(g)
		// P99 ≈ 20.5 ms, P99.9 ≈ 41 ms (bin upper bounds): max(61, 82) + 50.
		if s := g.Snapshot(); dur(s.RecommendedTimeout) != 132*time.Millisecond {
			t.Fatalf("recommended %v for %+v", dur(s.RecommendedTimeout), s.Latency)
		}
	})

	t.Run("hang", func(t *testing.T) {
		// One timed-out call in the window: its 500 ms is the budget, not
		// the dependency's latency.
		g := mustGuard(t, logistics, WithClock(newFakeClock()))
		feed(g, 1, KindTimeout, 500*time.Millisecond)
		if s := g.Snapshot(); s.RecommendedTimeout != nil {
			t.Fatalf("one timeout: recommended %v", dur(s.RecommendedTimeout))
		}
		// After a healthy baseline: the hang opens the breaker and the
		// advice stays what the successes say.
		g = mustGuard(t, logistics, WithClock(newFakeClock()))
		healthyBaseline(g)
		before := dur(g.Snapshot().RecommendedTimeout)
		feed(g, 50, KindTimeout, 500*time.Millisecond)
		s := g.Snapshot()
		if s.Breaker != StateOpen {
			t.Fatalf("breaker %v after 50 timeouts in a row", s.Breaker)
		}
		if dur(s.RecommendedTimeout) != before {
			t.Fatalf("during a hang: recommended %v (before %v)", dur(s.RecommendedTimeout), before)
		}
	})

	t.Run("slow shift", func(t *testing.T) {
		clk := newFakeClock()
		g := mustGuard(t, logistics, WithClock(clk))
		healthyBaseline(g)
		clk.Advance(11 * time.Second) // the baseline leaves the window
		// Latency shifts to 300 ms with a 330 ms tail; nothing times out.
		feed(g, 990, KindSuccess, 300*time.Millisecond)
		feed(g, 10, KindSuccess, 330*time.Millisecond)
		s := g.Snapshot()
		if rec := dur(s.RecommendedTimeout); rec < 3*300*time.Millisecond || rec%time.Millisecond != 0 {
			t.Fatalf("recommended %v for %+v", rec, s.Latency)
		}
	})
}

func TestConfigValidateNamesKey(t *testing.T) {
	tests := map[string]Config{
		"timeout":                 {Timeout: -1},
		"bulkhead.max_concurrent": {Bulkhead: BulkheadConfig{MaxConcurrent: -3}},
		"breaker.window":          {Breaker: BreakerConfig{Window: time.Millisecond}},
		"breaker.error_percent":   {Breaker: BreakerConfig{ErrorPercent: 101}},
		"breaker.sleep_window":    {Breaker: BreakerConfig{SleepWindow: -1}},
		"retry.max_attempts":      {Retry: RetryConfig{MaxAttempts: 11}},
		"retry.max_backoff":       {Retry: RetryConfig{Backoff: time.Second, MaxBackoff: time.Millisecond}},
	}
	for key, cfg := range tests {
		err := cfg.WithDefaults().Validate()
		if err == nil || !containsKey(err.Error(), key) {
			t.Errorf("%s: err %v", key, err)
		}
	}
	if err := (Config{}).WithDefaults().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
}

func containsKey(msg, key string) bool {
	return len(msg) >= len(key) && (msg[:len(key)] == key || contains(msg, "\n"+key))
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// The backoff before retry k is drawn from (0, min(backoff×2^(k-1),
// max_backoff)]: with the random source pinned to its top the waits are the
// ceilings themselves, with it pinned to the middle they are half.
func TestRetryBackoffGrowsToItsCap(t *testing.T) {
	for _, tc := range []struct {
		name string
		rnd  func(n int64) int64
		want string
	}{
		{"ceilings", func(n int64) int64 { return n - 1 }, "[10ms 20ms 40ms 80ms 100ms 100ms]"},
		{"half", func(n int64) int64 { return n/2 - 1 }, "[5ms 10ms 20ms 40ms 50ms 50ms]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			clk.auto = true // a backoff timer fires at once and moves the clock by its wait
			rec := &recorder{}
			g := mustGuard(t, Config{
				Retry:   RetryConfig{MaxAttempts: 7}, // default backoff 10ms, max_backoff 100ms
				Breaker: BreakerConfig{ConsecutiveFailures: 100},
			}, WithClock(clk), WithListener(rec), WithRandom(tc.rnd))
			Do(context.Background(), g, fail)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			var waits []time.Duration
			for i := 1; i < len(rec.events); i++ {
				waits = append(waits, rec.events[i].Start.Sub(rec.events[i-1].Start))
			}
			if got := fmt.Sprint(waits); got != tc.want {
				t.Fatalf("waits %s, want %s", got, tc.want)
			}
		})
	}
}
