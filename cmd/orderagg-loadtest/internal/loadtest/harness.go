package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orderagg/orderagg/cmd/orderagg-loadtest/internal/loadtest/floor"
	"github.com/orderagg/orderagg/internal/app"
	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/sim"
)

// The downstream profiles of the background study (seed 003): a fast
// service, a slow one with occasional errors, and a flaky third party.
var (
	profileFast = sim.Fault{LatencyMS: 5}
	profileSlow = sim.Fault{LatencyMS: 80, ErrorRate: 0.01}
	// profileFlaky is 150 ms; the 5 % stalls to 500 ms are added by
	// stallMiddleware, because the simulator's jitter is uniform and cannot
	// express "usually 150 ms, sometimes 500 ms".
	profileFlaky = sim.Fault{LatencyMS: 150}
	flakyStall   = stall{rate: 0.05, extra: 350 * time.Millisecond}
)

// stall is a mixture-latency fault: with probability rate a request waits
// extra before the simulator's own fault applies.
type stall struct {
	rate  float64
	extra time.Duration
}

// shape is how the simulator behaves for one step: a fault per service and
// an optional stall per service.
type shape struct {
	faults map[string]sim.Fault
	stalls map[string]stall
}

// studyShape is the study's call chain mapped onto orderagg's four
// dependencies: the order and coupon services are fast, inventory is the
// slow one, logistics the flaky third party.
func studyShape() shape {
	return shape{
		faults: map[string]sim.Fault{
			sim.ServiceOrder: profileFast, sim.ServiceInventory: profileSlow,
			sim.ServiceCoupon: profileFast, sim.ServiceLogistics: profileFlaky,
		},
		stalls: map[string]stall{sim.ServiceLogistics: flakyStall},
	}
}

// uniformShape gives every service the same fault.
func uniformShape(f sim.Fault) shape {
	s := shape{faults: map[string]sim.Fault{}}
	for _, svc := range sim.Services() {
		s.faults[svc] = f
	}
	return s
}

// simStack is a running simulator on a loopback port.
type simStack struct {
	sim  *sim.Server
	url  string
	stop func()
}

// startSim serves a fresh simulator shaped by sh on 127.0.0.1:0.
func startSim(sh shape) (*simStack, error) {
	s := sim.New()
	for svc, f := range sh.faults {
		if err := s.SetFault(svc, f); err != nil {
			return nil, err
		}
	}
	var h http.Handler = s
	if len(sh.stalls) > 0 {
		h = &stallMiddleware{next: s, stalls: sh.stalls, rng: rand.New(rand.NewPCG(3, 7))}
	}
	url, stop, err := serveLoopback("sim", h, s.Close)
	if err != nil {
		return nil, err
	}
	return &simStack{sim: s, url: url, stop: stop}, nil
}

// stallMiddleware adds stalls in front of the simulator. A stall honours
// the request's context and its X-Budget-Ms header: it is taken out of the
// budget passed on, and a client whose budget it used up gets the
// simulator's 504 BUDGET_EXHAUSTED, as it would for a long latency. (Such a
// request never reaches the simulator, so its /stats do not count it; no
// experiment counts the stalled service's requests.)
type stallMiddleware struct {
	next   http.Handler
	stalls map[string]stall
	mu     sync.Mutex
	rng    *rand.Rand
}

func (m *stallMiddleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	svc, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	st, ok := m.stalls[svc]
	if ok {
		m.mu.Lock()
		hit := m.rng.Float64() < st.rate
		m.mu.Unlock()
		if hit {
			wait := st.extra
			budget, err := strconv.ParseInt(r.Header.Get(sim.HeaderBudget), 10, 64)
			hasBudget := err == nil && budget >= 0
			if hasBudget {
				wait = min(wait, time.Duration(budget)*time.Millisecond)
			}
			t := time.NewTimer(wait)
			select {
			case <-r.Context().Done():
				t.Stop()
				return
			case <-t.C:
			}
			if hasBudget {
				left := budget - wait.Milliseconds()
				if left <= 0 {
					// What the simulator answers when a budget runs out.
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusGatewayTimeout)
					_, _ = w.Write([]byte(`{"error":{"code":"BUDGET_EXHAUSTED","message":"the client's budget ran out during a stall"}}` + "\n"))
					return
				}
				r.Header.Set(sim.HeaderBudget, strconv.FormatInt(left, 10))
			}
		}
	}
	m.next.ServeHTTP(w, r)
}

// serveLoopback serves h on 127.0.0.1:0 on an owned goroutine. stop runs
// beforeShutdown (to release held requests), shuts the server down and
// waits for the goroutine.
func serveLoopback(component string, h http.Handler, beforeShutdown func()) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		labelComponent(component)
		_ = srv.Serve(ln)
	}()
	stop := func() {
		if beforeShutdown != nil {
			beforeShutdown()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-done
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// labelComponent labels the calling goroutine, and so every goroutine it
// starts from now on (servers' connections, their handlers, the clients
// they dial), with component=name: a --cpuprofile of a scenario, where
// everything shares one process, can then be split with
// `go tool pprof -tagfocus component=orderagg` (or floor, sim; the load
// generator is unlabelled).
func labelComponent(name string) {
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("component", name)))
}

// startService runs orderagg in-process against simURL, with its
// per-dependency settings edited by edit and its last-good cache at
// redisURL (empty: embedded), and returns its base URL and a stop function
// that waits for it to finish.
func startService(ctx context.Context, simURL, redisURL string, edit func(*config.Dependencies)) (string, func(), error) {
	args := []string{"--addr", "127.0.0.1:0", "--log-level", "error"}
	if redisURL != "" {
		args = append(args, "--redis-url", redisURL)
	}
	cfg, err := config.ParseServeArgs(args)
	if err != nil {
		return "", nil, err
	}
	cfg.URLs = config.SameURL(simURL) // every registered downstream at the simulator
	if edit != nil {
		edit(&cfg.Dependencies)
		for _, name := range cfg.Dependencies.Names() {
			cfg.Dependencies.Update(name, func(d *config.Dependency) { d.Config = d.Config.WithDefaults() })
		}
		if err := cfg.Dependencies.Validate(cfg.Bounds()); err != nil {
			return "", nil, fmt.Errorf("scenario settings: %w", err)
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	ready := make(chan app.Addrs, 1)
	done := make(chan error, 1)
	go func() {
		labelComponent(kindOrderagg)
		done <- app.Serve(sctx, cfg, app.Env{
			Stderr:  io.Discard,
			OnReady: func(a app.Addrs) { ready <- a },
		})
	}()
	select {
	case a := <-ready:
		return "http://" + a.API, func() { cancel(); <-done }, nil
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("the service stopped before it was ready")
		}
		return "", nil, err
	}
}

// startFloor serves the bare aggregator against simURL.
func startFloor(simURL string, attempts int) (string, func(), error) {
	f := floor.New(floor.Config{BaseURL: simURL, Attempts: attempts})
	url, stop, err := serveLoopback(kindFloor, f, nil)
	if err != nil {
		return "", nil, err
	}
	return url, func() { stop(); f.Close() }, nil
}

// stack is one step's simulator and the aggregator under test in front of
// it.
type stack struct {
	sim  *simStack
	url  string
	stop func()
}

// Aggregators an experiment can put in front of the simulator.
const (
	kindOrderagg = "orderagg"
	kindFloor    = "floor"
)

// up starts a simulator shaped by sh and, in front of it, orderagg (with
// edit applied) or the floor (with attempts per call).
func (e *experiment) up(ctx context.Context, sh shape, kind string, edit func(*config.Dependencies), attempts int) (*stack, error) {
	s, err := startSim(sh)
	if err != nil {
		return nil, err
	}
	var (
		url  string
		stop func()
	)
	if kind == kindFloor {
		url, stop, err = startFloor(s.url, attempts)
	} else {
		url, stop, err = startService(ctx, s.url, e.o.RedisURL, edit)
	}
	if err != nil {
		s.stop()
		return nil, err
	}
	return &stack{sim: s, url: url, stop: func() { stop(); s.stop() }}, nil
}
