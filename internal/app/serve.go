package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

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

// Serve runs the order-detail service until ctx ends, then drains:
// readiness goes 503, the listeners stop accepting, requests in flight
// finish (each bounded by the deadline), and the rest closes, all within
// cfg.ShutdownTimeout. An error that matches config.ErrUsage is the
// operator's (exit status 2).
//
// It starts the parts bottom up, in the order a request meets them from
// the far end: telemetry, the downstreams, the last-good store, the guards,
// the page, the HTTP edge. Each step pushes what it opened on a close
// stack, so everything closes in the reverse order, the listeners first.
func Serve(ctx context.Context, cfg config.Serve, env Env) error {
	s := &serving{cfg: cfg, env: env, logger: newLogger(env.Stderr, cfg.LogLevel)}
	defer s.closers.closeAll(s.logger, cfg.ShutdownTimeout)
	steps := []func(context.Context) error{s.setupTelemetry, s.startSimulators, s.openCache, s.buildGuards, s.buildPage, s.startServers, s.observe}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	s.announceReady()
	for {
		select {
		case <-ctx.Done():
			s.ready.Store(false)
			s.logger.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout.String())
			return nil
		case <-env.Reload:
			s.ctl.reloadFile(cfg)
		}
	}
}

// serving is a Serve in progress: each step adds its parts.
type serving struct {
	cfg     config.Serve
	env     Env
	logger  *slog.Logger
	closers closeStack
	ready   atomic.Bool

	tel    *telemetry.Telemetry
	gauges telemetry.State // filled by the steps, registered by observe
	sim    *sim.Server     // demo mode only
	store  *cache.Store
	guards []*resilience.Guard // in config.Dependencies.Names order
	page   *orderdetail.Aggregator
	ctl    *control
	addrs  Addrs
}

// setupTelemetry comes first, so it is flushed last. It reads the OTEL_*
// variables (contract §3), as the OpenTelemetry exporters themselves do.
func (s *serving) setupTelemetry(ctx context.Context) error {
	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceVersion: s.env.Version, Logger: s.logger, SpanExporter: s.env.SpanExporter,
		TrustedProxies: s.cfg.TrustedProxies, ForwardBaggage: s.cfg.ForwardBaggage})
	if err != nil {
		return fmt.Errorf("%w: %w", config.ErrUsage, err)
	}
	s.tel = tel
	s.closers.push("telemetry", tel.Shutdown)
	return nil
}

// startSimulators, in embedded demo mode (no downstream URL set), serves
// the simulated downstreams in-process and points every URL at them.
func (s *serving) startSimulators(context.Context) error {
	if !s.cfg.EmbeddedDownstreams() {
		return nil
	}
	s.sim = sim.New(sim.WithLogger(s.logger.With("component", "sim")))
	srv, addr, err := s.serve("sim", "127.0.0.1:0", func(g *handlers.HostGuard) http.Handler { return g.Wrap(s.sim) })
	if err != nil {
		return fmt.Errorf("starting embedded simulators: %w", err)
	}
	srv.RegisterOnShutdown(s.sim.Close)
	s.addrs.Sim = addr
	s.cfg.URLs = config.SameURL("http://" + addr)
	hang, heal := demoCommands(addr)
	s.logger.Info("embedded demo mode: simulated downstreams in-process", "sim_addr", addr, "inject_fault", hang, "clear_faults", heal)
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
	if c := store.Client(); c != nil {
		if err := s.tel.InstrumentRedis(c); err != nil {
			return fmt.Errorf("instrumenting redis: %w", err)
		}
	}
	s.gauges.Cache = store.Stats
	return nil
}

// buildGuards makes one guard per dependency. An adaptive sub-budget can
// use at most what a page leaves a call: the deadline minus the reserve.
func (s *serving) buildGuards(context.Context) error {
	listener := s.tel.Listener()
	for _, name := range s.cfg.Dependencies.Names() {
		d, _ := s.cfg.Dependencies.Get(name)
		g, err := resilience.New(name, d.Config, resilience.WithListener(listener),
			resilience.WithTracerProvider(s.tel.TracerProvider()), resilience.WithCallsEnd(s.cfg.Deadline-s.cfg.Reserve))
		if err != nil {
			return err
		}
		s.guards = append(s.guards, g)
	}
	s.gauges.Guards = s.guards
	return nil
}

// buildPage makes the order-detail page: one client per registered
// downstream, behind its guard, and the aggregator over them and the
// last-good store; and the control that changes them at run time.
func (s *serving) buildPage(context.Context) error {
	deps := s.cfg.Dependencies
	guards := map[string]*resilience.Guard{}
	for _, g := range s.guards {
		guards[g.Name()] = g
	}
	byName := map[string]*orderdetail.Downstream{}
	var core *orderdetail.Downstream
	var rest []*orderdetail.Downstream
	for _, e := range downstream.Registered() {
		d, _ := deps.Get(e.Name)
		ds, closeClient, err := e.New(e, downstream.Config{
			BaseURL:       s.cfg.URLs[e.Name],
			MaxIdleConns:  2 * d.Bulkhead.MaxConcurrent,
			WrapTransport: s.tel.WrapTransport,
		}, guards[e.Name], d.CacheMaxAge)
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
		Core:       core,
		Sections:   rest,
		Store:      s.store,
		CacheGuard: guards[config.NameCache],
		Reserve:    s.cfg.Reserve,
		Observer:   s.tel.Listener(),
	})
	if err != nil {
		return err
	}
	s.page = page
	s.ctl = &control{deps: deps, bounds: s.cfg.Bounds(), guards: guards, downstreams: byName, logger: s.logger}
	return nil
}

// startServers starts the HTTP edge: the public API with the dashboard,
// behind admission, and, when --admin-addr is set, the admin API. Pushed
// after everything they use, the servers are shut down first: stop taking
// requests and finish those in flight before their dependencies go.
func (s *serving) startServers(context.Context) error {
	report := func() handlers.ResilienceReport {
		return handlers.NewResilienceReport(time.Now(), s.cfg.Deadline, s.guards)
	}
	dashOpts := dashboard.Options{Report: report, Logger: s.logger, MaxStreams: s.cfg.MaxEventStreams}
	if s.sim != nil {
		dashOpts.Faults = s.sim // demo mode: the page can break a dependency
	}
	dash := dashboard.New(dashOpts)
	dash.Start() // the last minute, for a page opened later
	s.closers.push("dashboard", func(context.Context) error { dash.Close(); return nil })

	limiter := admission.New(s.cfg.MaxInflight)
	s.gauges.Admission = func() (int, int) { return limiter.Limit(), limiter.Inflight() }
	opts := handlers.Options{
		Pager:      s.page,
		Deadline:   s.cfg.Deadline,
		Limiter:    limiter,
		Report:     report,
		Dashboard:  dash,
		Ready:      s.ready.Load,
		Logger:     s.logger,
		Metrics:    s.tel.MetricsHandler(),
		Record:     s.tel.RecordRequest,
		Rejected:   s.tel.RecordRejected,
		Middleware: []echo.MiddlewareFunc{s.tel.Middleware()},
	}
	api, addr, err := s.serve("api", s.cfg.Addr, func(g *handlers.HostGuard) http.Handler { opts.Guard = g; return handlers.New(opts) })
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	api.RegisterOnShutdown(dash.Close) // live streams would hold the drain open
	s.addrs.API = addr
	s.gauges.Connections = map[string]func() int64{"api": api.Open}
	if s.cfg.AdminAddr == "" {
		return nil
	}
	admin, addr, err := s.serve("admin", s.cfg.AdminAddr, func(g *handlers.HostGuard) http.Handler {
		return handlers.NewAdmin(s.ctl, s.cfg.AdminToken, g, s.logger)
	})
	if err != nil {
		return fmt.Errorf("--admin-addr: %w", err)
	}
	s.addrs.Admin = addr
	s.gauges.Connections["admin"] = admin.Open
	return nil
}

// observe registers the gauges, read at scrape time, of what the steps built.
func (s *serving) observe(context.Context) error { return s.tel.Observe(s.gauges) }

// serve listens on addr and serves there the handler h builds around the
// address's host guard, until the close stack shuts it down: pushed after
// everything h uses, it stops taking requests and finishes those in flight
// before they go.
func (s *serving) serve(name, addr string, h func(*handlers.HostGuard) http.Handler) (*server, string, error) {
	ln, guard, err := listen(addr, s.cfg.AllowedHosts)
	if err != nil {
		return nil, "", err
	}
	srv := serveHTTP(ln, h(guard), httpTimeouts(s.cfg.Deadline, s.cfg.ReadHeaderTimeout), s.logger.With("server", name))
	s.closers.push(name+" server", srv.Shutdown)
	return srv, ln.Addr().String(), nil
}

// announceReady turns readiness on and says where the service listens: in
// the log, on a terminal in demo mode, and to env.OnReady.
func (s *serving) announceReady() {
	s.ready.Store(true)
	s.logger.Info("ready", "addr", s.addrs.API, "admin_addr", s.addrs.Admin, "deadline", s.cfg.Deadline)
	terminal := s.env.IsTerminal
	if terminal == nil {
		terminal = isTerminal
	}
	if w := s.env.Stderr; s.addrs.Sim != "" && w != nil && terminal(w) {
		// Plain lines that paste into a shell (the JSON line escapes their
		// quotes), in one write so no log line lands inside.
		hang, heal := demoCommands(s.addrs.Sim)
		fmt.Fprintf(w, "\n# orderagg demo mode: the downstreams are simulated in-process at http://%s\n"+
			"# watch http://%s/dashboard, then make logistics hang:\n%s\n# and heal every downstream:\n%s\n\n", s.addrs.Sim, s.addrs.API, hang, heal)
	}
	if s.env.OnReady != nil {
		s.env.OnReady(s.addrs)
	}
}

// demoCommands are the demo's fault commands against the simulators at addr.
func demoCommands(addr string) (hang, heal string) {
	return fmt.Sprintf(`curl -X PUT http://%s/faults/logistics -d '{"hang":true}'`, addr), "curl -X DELETE http://" + addr + "/faults"
}

// RunSim serves the simulated downstreams until ctx ends.
func RunSim(ctx context.Context, cfg config.Sim, env Env) error {
	logger := newLogger(env.Stderr, cfg.LogLevel)
	s := sim.New(sim.WithLogger(logger))
	ln, guard, err := listen(cfg.Addr, cfg.AllowedHosts)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	srv := serveHTTP(ln, guard.Wrap(s), httpTimeouts(0, 0), logger.With("server", "sim"))
	srv.RegisterOnShutdown(s.Close)
	logger.Info("ready", "addr", ln.Addr().String(), "services", sim.Services())
	if env.OnReady != nil {
		env.OnReady(Addrs{Sim: ln.Addr().String()})
	}
	<-ctx.Done()
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
