// Package app wires orderagg's parts into the running programs: `serve` (the
// order-detail service) and `sim` (the simulated downstreams). It owns every
// long-lived goroutine and closes everything it opened, in order, on the way
// out. cmd/orderagg only parses arguments and signals and calls in here, so
// tests start the real service in-process.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/orderagg/orderagg/internal/admission"
	"github.com/orderagg/orderagg/internal/cache"
	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/dashboard"
	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
	"github.com/orderagg/orderagg/internal/sim"
	"github.com/orderagg/orderagg/internal/telemetry"
)

// Env is what a program gets from its surroundings.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer // structured logs go here
	Getenv func(string) string
	// Reload delivers config reload requests (SIGHUP in main).
	Reload <-chan struct{}
	// OnReady, if set, is told the bound addresses once serving (tests).
	OnReady func(Addrs)
	// Version is the build's version, reported as service.version.
	Version string
	// IsTerminal reports whether w is a terminal; nil means a character
	// device check on an *os.File. In demo mode, a terminal Stderr also
	// gets the fault commands as plain lines that paste into a shell.
	IsTerminal func(w io.Writer) bool
	// SpanExporter, if set, receives every span in place of the exporter
	// OTEL_TRACES_EXPORTER names (tests: an in-memory exporter).
	SpanExporter sdktrace.SpanExporter
	// NearClock, if set, is the near cache's clock (tests move it past the
	// TTL to make the next last-good read go to Redis).
	NearClock func() time.Time
}

// isTerminal reports whether w is a character device (a terminal, or
// /dev/null, where the extra lines do no harm); pipes, files and sockets,
// where log collectors read, are not.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Addrs are the addresses a running service listens on.
type Addrs struct {
	API   string
	Admin string // empty when the admin API is off
	Sim   string // the embedded simulators' address, in demo mode
}

// newLogger writes JSON lines to w, each carrying the trace and span ids of
// its context when there are any. Durations are written as "1.5s", not as
// nanoseconds, which no reader of a log line can take in at a glance.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	if w == nil {
		w = os.Stderr
	}
	return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationString})))
}

func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// Serve runs the order-detail service until ctx ends, then drains: readiness
// goes 503, the listeners stop accepting, requests in flight finish (each is
// bounded by the deadline), and the cache and simulators close.
//
// It starts the parts in the order a request meets them from the bottom up
// — what it is traced and measured with, the downstreams, the last-good
// store, the guards, the page, the HTTP edge — so that each step has what
// it needs, and everything is closed in the reverse order.
func Serve(ctx context.Context, cfg config.Serve, env Env) error {
	s := &serving{cfg: cfg, env: env, logger: newLogger(env.Stderr, cfg.SlogLevel())}
	defer s.closers.closeAll(s.logger, cfg.ShutdownTimeout)

	if err := s.setupTelemetry(ctx); err != nil {
		return err
	}
	if s.cfg.EmbeddedDownstreams() {
		if err := s.startSimulators(); err != nil {
			return err
		}
	}
	if err := s.openCache(ctx); err != nil {
		return err
	}
	if err := s.buildGuards(); err != nil {
		return err
	}
	if err := s.buildPage(); err != nil {
		return err
	}
	if err := s.startServers(); err != nil {
		return err
	}
	s.announceReady()
	return s.run(ctx)
}

// serving is a Serve in progress: each step adds its parts, and pushes on
// closers what must be closed on the way out.
type serving struct {
	cfg     config.Serve
	env     Env
	logger  *slog.Logger
	closers closeStack
	ready   atomic.Bool

	tel     *telemetry.Telemetry
	sim     *sim.Server // demo mode only
	simAddr string
	store   *cache.Store
	guards  map[string]*resilience.Guard // by dependency name
	ordered []*resilience.Guard          // in config.Dependencies.Names order
	page    *orderdetail.Aggregator
	ctl     *control

	apiAddr, adminAddr string
}

// setupTelemetry comes first, so it is flushed last, after the servers
// drained. It reads the OTEL_* variables from the process environment
// (contract §3), as the OpenTelemetry exporters themselves do.
func (s *serving) setupTelemetry(ctx context.Context) error {
	tel, err := telemetry.Setup(ctx, telemetry.Config{
		ServiceVersion: s.env.Version,
		Logger:         s.logger,
		SpanExporter:   s.env.SpanExporter,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", config.ErrUsage, err)
	}
	s.tel = tel
	s.closers.push("telemetry", tel.Shutdown)
	return nil
}

// startSimulators serves the simulated downstreams in-process (demo mode)
// and points every downstream's URL at them.
func (s *serving) startSimulators() error {
	s.sim = sim.New(sim.WithLogger(s.logger.With("component", "sim")))
	srv, addr, err := startHTTP("127.0.0.1:0", s.sim, s.timeouts(), s.logger.With("server", "sim"))
	if err != nil {
		return fmt.Errorf("starting embedded simulators: %w", err)
	}
	srv.RegisterOnShutdown(s.sim.Close)
	s.closers.push("simulators", srv.Shutdown)
	s.simAddr = addr
	base := "http://" + addr
	s.cfg.URLs = config.SameURL(base)
	s.logger.Info("embedded demo mode: simulated downstreams in-process",
		"sim_addr", addr, "inject_fault", injectFault(base), "clear_faults", clearFaults(base))
	return nil
}

// openCache connects the last-good store, traced and measured.
func (s *serving) openCache(ctx context.Context) error {
	store, err := cache.Open(ctx, cache.Config{URL: s.cfg.RedisURL}, s.logger)
	if err != nil {
		return fmt.Errorf("--redis-url: %w", err)
	}
	s.store = store
	s.closers.push("cache", store.Close)
	if err := s.tel.InstrumentRedis(store.Client()); err != nil {
		return fmt.Errorf("instrumenting redis: %w", err)
	}
	return s.tel.ObserveCache(func() telemetry.CacheStats { return telemetry.CacheStats(store.Stats()) })
}

// buildGuards makes one guard per dependency, from the one list of
// settings. An adaptive sub-budget can use at most what a page leaves a
// call: the deadline minus the reserve.
func (s *serving) buildGuards() error {
	s.guards = map[string]*resilience.Guard{}
	listener := s.tel.Listener(s.logger)
	for _, name := range s.cfg.Dependencies.Names() {
		d, _ := s.cfg.Dependencies.Get(name)
		g, err := resilience.New(name, d.Config, resilience.WithListener(listener), resilience.WithCeiling(s.cfg.Deadline-s.cfg.Reserve))
		if err != nil {
			return err
		}
		s.guards[name] = g
		s.ordered = append(s.ordered, g)
	}
	return s.tel.ObserveGuards(s.ordered)
}

// buildPage makes the order-detail page: one client per registered
// downstream (internal/downstream's registry), in page order, behind its
// guard, and the aggregator over them and the last-good store. The control
// it hands to the admin API and reloads changes them at run time.
func (s *serving) buildPage() error {
	deps := s.cfg.Dependencies
	byName := map[string]orderdetail.Downstream{}
	var core orderdetail.Downstream
	var rest []orderdetail.Downstream
	for _, e := range downstream.Registered() {
		d, _ := deps.Get(e.Name)
		ds, closeClient, err := e.Build(downstream.Config{
			BaseURL: s.cfg.URLs[e.Name],
			// Twice the bulkhead: room for hedges and for connections
			// still closing.
			MaxConns:      2 * d.Bulkhead.MaxConcurrent,
			WrapTransport: s.tel.WrapTransport,
		}, s.guards[e.Name], d.CacheMaxAge)
		if err != nil {
			return fmt.Errorf("--%s-url: %w", e.Name, err)
		}
		s.closers.push(e.Name+" client", func(context.Context) error { closeClient(); return nil })
		byName[e.Name] = ds
		if e.Core {
			core = ds
		} else {
			rest = append(rest, ds)
		}
	}
	page, err := orderdetail.New(orderdetail.Config{
		Core:     core,
		Sections: rest,
		// Reads reused for a moment: while a breaker is open, every page
		// of an order needs the same last-good entry (cache.Near).
		Store:      cache.NewNear(s.store, cache.NearConfig{Now: s.env.NearClock}),
		CacheGuard: s.guards[config.NameCache],
		Reserve:    s.cfg.Reserve,
		Observer:   s.tel.Observer(),
		// Popular orders are answered many times a second; one write per
		// section per order every 10 s keeps Redis load proportional to the
		// distinct orders, not the traffic (when the embedded server still
		// ran the newest-wins script in Lua, 1 s cost more CPU than the
		// page). A cached copy's as_of may trail the latest live
		// answer by up to 10 s when its content changed, by up to a
		// minute when it did not (writeThrottle) — inside every max age.
		RewriteInterval: 10 * time.Second,
	})
	if err != nil {
		return err
	}
	s.closers.push("aggregator", func(context.Context) error { page.Close(); return nil })
	s.page = page
	s.ctl = &control{deps: deps, deadline: s.cfg.Deadline, maxInflight: s.cfg.MaxInflight,
		guards: s.guards, downstreams: byName, logger: s.logger}
	s.ctl.warnUndersized("")
	return nil
}

// startServers starts the HTTP edge: the dashboard, the public API behind
// admission and, when --admin-addr is set, the admin API.
func (s *serving) startServers() error {
	report := func() handlers.ResilienceReport {
		return handlers.NewResilienceReport(time.Now(), s.cfg.Deadline, s.ordered)
	}
	dashOpts := dashboard.Options{Report: report, Logger: s.logger, MaxStreams: s.cfg.MaxEventStreams}
	if s.sim != nil {
		dashOpts.Faults = s.sim // demo mode: the page can break a dependency
	}
	dash := dashboard.New(dashOpts)
	dash.Start() // the last minute, for a page opened later
	s.closers.push("dashboard", func(context.Context) error { dash.Close(); return nil })

	limiter, err := newLimiter(s.cfg)
	if err != nil {
		return fmt.Errorf("%w: --admission: %w", config.ErrUsage, err)
	}
	if err := s.tel.ObserveAdmission(limiter.Limit, limiter.Inflight); err != nil {
		return err
	}
	public := handlers.New(handlers.Options{
		Pager:       s.page,
		Deadline:    s.cfg.Deadline,
		MaxInflight: s.cfg.MaxInflight,
		Limiter:     limiter,
		Report:      report,
		Dashboard:   dash,
		Ready:       s.ready.Load,
		Logger:      s.logger,
		Metrics:     s.tel.MetricsHandler(),
		Record:      s.tel.RecordRequest,
		Rejected:    s.tel.RecordRejected,
		Middleware:  []echo.MiddlewareFunc{s.tel.Middleware()},
	})
	apiSrv, addr, err := startHTTP(s.cfg.Addr, public, s.timeouts(), s.logger.With("server", "api"))
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	apiSrv.RegisterOnShutdown(dash.Close) // live streams would hold the drain open
	// Pushed after everything the API uses, so it is shut down first: stop
	// taking requests and finish those in flight before their dependencies
	// go away.
	s.closers.push("api server", apiSrv.Shutdown)
	s.apiAddr = addr
	if err := s.tel.ObserveConnections("api", apiSrv.Open); err != nil {
		return err
	}
	if s.cfg.AdminAddr == "" {
		return nil
	}
	adminSrv, addr, err := startHTTP(s.cfg.AdminAddr, handlers.NewAdmin(s.ctl, s.cfg.AdminToken, s.logger), s.timeouts(), s.logger.With("server", "admin"))
	if err != nil {
		return fmt.Errorf("--admin-addr: %w", err)
	}
	s.closers.push("admin server", adminSrv.Shutdown)
	s.adminAddr = addr
	return s.tel.ObserveConnections("admin", adminSrv.Open)
}

func (s *serving) timeouts() timeouts { return httpTimeouts(s.cfg.Deadline, s.cfg.ReadHeaderTimeout) }

// announceReady turns readiness on and says where the service listens: in
// the log, on a terminal in demo mode, and to env.OnReady.
func (s *serving) announceReady() {
	s.ready.Store(true)
	s.logger.Info("ready", "addr", s.apiAddr, "admin_addr", s.adminAddr, "deadline", s.cfg.Deadline, "config", s.cfg)
	if s.simAddr != "" {
		terminal := s.env.IsTerminal
		if terminal == nil {
			terminal = isTerminal
		}
		if w := s.env.Stderr; w != nil && terminal(w) {
			printDemoCommands(w, "http://"+s.simAddr, "http://"+s.apiAddr)
		}
	}
	if s.env.OnReady != nil {
		s.env.OnReady(Addrs{API: s.apiAddr, Admin: s.adminAddr, Sim: s.simAddr})
	}
}

// run serves until ctx ends, reloading the --config file on each request,
// then turns readiness off; Serve's deferred closers drain the rest.
func (s *serving) run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			s.ready.Store(false)
			s.logger.Info("shutting down: draining in-flight requests", "timeout", s.cfg.ShutdownTimeout.String())
			return nil
		case <-s.env.Reload:
			reload(s.cfg, s.ctl, s.logger)
		}
	}
}

// injectFault and clearFaults are the demo's fault commands, for the log
// line and for the terminal.
func injectFault(simBase string) string {
	return fmt.Sprintf(`curl -X PUT %s/faults/logistics -d '{"hang":true}'`, simBase)
}

func clearFaults(simBase string) string { return fmt.Sprintf("curl -X DELETE %s/faults", simBase) }

// printDemoCommands writes the fault commands as plain lines: in the JSON
// log line their quotes are escaped, so they cannot be pasted. The other
// lines are shell comments, so pasting the whole block works too (it ends
// healthy).
func printDemoCommands(w io.Writer, simBase, apiBase string) {
	// One write, so no log line from another goroutine lands inside.
	_, _ = io.WriteString(w, fmt.Sprintf("\n# orderagg demo mode: the downstreams are simulated in-process at %s\n"+
		"# watch %s/dashboard, then make logistics hang:\n%s\n"+
		"# and heal every downstream:\n%s\n\n",
		simBase, apiBase, injectFault(simBase), clearFaults(simBase)))
}

// newLimiter is the order-detail admission limit --admission asks for.
func newLimiter(cfg config.Serve) (admission.Limiter, error) {
	if cfg.Admission == config.AdmissionAdaptive {
		// Settle must outlast every request admitted before a cut.
		return admission.Adaptive(admission.AdaptiveConfig{Max: cfg.MaxInflight, Settle: cfg.Deadline + 500*time.Millisecond})
	}
	return admission.Fixed(cfg.MaxInflight), nil
}

// reload re-reads the --config file; a bad file keeps the settings in force.
func reload(cfg config.Serve, ctl *control, logger *slog.Logger) {
	if cfg.ConfigFile == "" {
		logger.Info("reload requested but no --config file is set; nothing to do")
		return
	}
	next, err := cfg.LoadDependencies()
	changed := 0
	if err == nil {
		changed, err = ctl.Reload(next)
	}
	if err != nil {
		logger.Error("config reload failed; keeping the settings in force", "file", cfg.ConfigFile, "err", err)
		return
	}
	logger.Info("config reloaded", "file", cfg.ConfigFile, "settings_changed", changed)
}

// RunSim serves the four simulated downstreams until ctx ends.
func RunSim(ctx context.Context, cfg config.Sim, env Env) error {
	logger := newLogger(env.Stderr, cfg.SlogLevel())
	s := sim.New(sim.WithLogger(logger))
	srv, addr, err := startHTTP(cfg.Addr, s, httpTimeouts(0, 0), logger.With("server", "sim"))
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	srv.RegisterOnShutdown(s.Close)
	logger.Info("ready", "addr", addr, "services", sim.Services())
	if env.OnReady != nil {
		env.OnReady(Addrs{Sim: addr})
	}
	<-ctx.Done()
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// timeouts of a server against slow or idle clients.
type timeouts struct {
	readHeader, read, write, idle time.Duration
}

// httpTimeouts leaves a request the whole deadline to be answered, plus room
// to write it; a client that dawdles over its headers is cut off after
// readHeader (--read-header-timeout; 0 means the default 5s).
func httpTimeouts(deadline, readHeader time.Duration) timeouts {
	if readHeader <= 0 {
		readHeader = 5 * time.Second
	}
	return timeouts{readHeader: readHeader, read: max(10*time.Second, readHeader), write: deadline + 10*time.Second, idle: 60 * time.Second}
}

// maxHeaderBytes makes the effective header limit 64 KiB: net/http allows
// 4 KiB of slack beyond MaxHeaderBytes.
const maxHeaderBytes = 64<<10 - 4096

// server is an http.Server with the goroutine that runs it: Shutdown stops
// it and waits for that goroutine, so nothing outlives the program.
type server struct {
	*http.Server
	done chan struct{}
	open atomic.Int64 // client connections held now
}

// Open reports the client connections the server holds now: accepted and
// not yet closed (hijacked ones are the handler's, and not counted).
func (s *server) Open() int64 { return s.open.Load() }

// Shutdown stops accepting, waits for requests in flight (bounded by ctx)
// and for the serving goroutine.
func (s *server) Shutdown(ctx context.Context) error {
	err := s.Server.Shutdown(ctx)
	if err != nil {
		s.Server.Close() // out of time: cut what is left
	}
	<-s.done
	return err
}

// startHTTP listens on addr and serves h until the returned server is shut
// down.
func startHTTP(addr string, h http.Handler, t timeouts, logger *slog.Logger) (*server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	srv := &server{Server: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.readHeader,
		ReadTimeout:       t.read,
		WriteTimeout:      t.write,
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          serverErrorLog(logger),
	}, done: make(chan struct{})}
	srv.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			srv.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			srv.open.Add(-1)
		}
	}
	go func() {
		defer close(srv.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return srv, ln.Addr().String(), nil
}

// closeStack closes what was opened, last first, each within the shutdown
// timeout's remainder.
type closeStack struct {
	mu    sync.Mutex
	names []string
	fns   []func(context.Context) error
}

func (c *closeStack) push(name string, fn func(context.Context) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names, c.fns = append(c.names, name), append(c.fns, fn)
}

func (c *closeStack) closeAll(logger *slog.Logger, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.fns) - 1; i >= 0; i-- {
		if err := c.fns[i](ctx); err != nil {
			logger.Error("shutdown step failed", "step", c.names[i], "err", err)
		}
	}
	logger.Info("stopped")
}
