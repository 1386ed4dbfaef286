package app

import (
	"context"
	"fmt"
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
// finish, and the rest closes, last opened first, all within
// cfg.ShutdownTimeout. It returns early with the error of a listener that
// stops by itself. An error matching config.ErrUsage is the operator's
// (exit status 2).
func Serve(ctx context.Context, cfg config.Serve, env Env) error {
	logger := newLogger(env.Stderr, cfg.LogLevel)
	p := &program{logger: logger, allowed: cfg.AllowedHosts, deadline: cfg.Deadline, readHeader: cfg.ReadHeaderTimeout,
		failed: make(chan error, 1)}
	defer p.closers.closeAll(logger, cfg.ShutdownTimeout)

	// Telemetry is opened first, so it is flushed last.
	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceVersion: env.Version, Logger: logger, SpanExporter: env.SpanExporter,
		TrustedProxies: cfg.TrustedProxies})
	if err != nil {
		return fmt.Errorf("%w: %w", config.ErrUsage, err)
	}
	p.closers.push("telemetry", tel.Shutdown)
	var addrs Addrs
	var gauges telemetry.State

	// Embedded demo mode: with no downstream URL set, the simulators run
	// in-process and every URL points at them.
	var simulator *sim.Server
	if cfg.EmbeddedDownstreams() {
		simulator = sim.New(sim.WithLogger(logger.With("component", "sim")))
		srv, err := p.serve("sim", "127.0.0.1:0", func(g *handlers.HostGuard) http.Handler { return g.Wrap(simulator) })
		if err != nil {
			return fmt.Errorf("starting embedded simulators: %w", err)
		}
		srv.RegisterOnShutdown(simulator.Close)
		addrs.Sim, cfg.URLs = srv.addr, config.SameURL("http://"+srv.addr)
		logger.Info("embedded demo mode: simulated downstreams in-process", "sim_addr", srv.addr,
			"inject_fault", "curl -X PUT http://"+srv.addr+`/faults/logistics -d '{"hang":true}'`,
			"clear_faults", "curl -X DELETE http://"+srv.addr+"/faults")
	}

	store, err := cache.Open(ctx, cache.Config{URL: cfg.RedisURL}, logger, cache.WithTracerProvider(tel.TracerProvider()))
	if err != nil {
		return fmt.Errorf("--redis-url: %w", err)
	}
	p.closers.push("cache", store.Close)
	if c := store.Client(); c != nil {
		if err := tel.InstrumentRedis(c); err != nil {
			return fmt.Errorf("instrumenting redis: %w", err)
		}
	}
	gauges.Cache = store.Stats

	guards := map[string]*resilience.Guard{}
	for _, name := range cfg.Dependencies.Names() {
		d, _ := cfg.Dependencies.Get(name)
		g, err := resilience.New(name, d.Config, resilience.WithListener(tel.Listener()),
			resilience.WithTracerProvider(tel.TracerProvider()))
		if err != nil {
			return err
		}
		guards[name], gauges.Guards = g, append(gauges.Guards, g)
	}

	page, downstreams, err := newPage(cfg, tel, store, guards, &p.closers)
	if err != nil {
		return err
	}
	ctl := &control{deps: cfg.Dependencies, bounds: cfg.Bounds(), guards: guards, downstreams: downstreams, logger: logger}

	report := func() handlers.ResilienceReport {
		return handlers.NewResilienceReport(time.Now(), cfg.Deadline, gauges.Guards)
	}
	// In demo mode the dashboard can break a dependency.
	dash := dashboard.New(dashboard.Options{Report: report, MaxStreams: cfg.MaxEventStreams, Faults: simulator})
	dash.Start() // the last minute, for a page opened later
	p.closers.push("dashboard", func(context.Context) error { dash.Close(); return nil })
	limiter := admission.New(cfg.MaxInflight)
	gauges.Admission = func() (int, int) { return limiter.Limit(), limiter.Inflight() }
	var ready atomic.Bool
	opts := handlers.Options{Pager: page, Deadline: cfg.Deadline, Limiter: limiter, Report: report, Dashboard: dash,
		Ready: ready.Load, Logger: logger, Metrics: tel.MetricsHandler(), Record: tel.RecordRequest, Rejected: tel.RecordRejected,
		Middleware: []echo.MiddlewareFunc{tel.Middleware()}}
	api, err := p.serve("api", cfg.Addr, func(g *handlers.HostGuard) http.Handler { opts.Guard = g; return handlers.New(opts) })
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	api.RegisterOnShutdown(dash.Close) // live streams would hold the drain open
	addrs.API = api.addr
	if cfg.AdminAddr != "" {
		admin, err := p.serve("admin", cfg.AdminAddr, func(g *handlers.HostGuard) http.Handler {
			return handlers.NewAdmin(ctl, cfg.AdminToken, g, logger)
		})
		if err != nil {
			return fmt.Errorf("--admin-addr: %w", err)
		}
		addrs.Admin = admin.addr
	}
	if err := tel.Observe(gauges); err != nil {
		return err
	}

	ready.Store(true)
	logger.Info("ready", "addr", addrs.API, "admin_addr", addrs.Admin, "deadline", cfg.Deadline)
	if env.OnReady != nil {
		env.OnReady(addrs)
	}
	defer ready.Store(false)
	for {
		select {
		case <-ctx.Done():
			logger.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout)
			return nil
		case err := <-p.failed:
			return err
		case <-env.Reload:
			ctl.reloadFile(cfg)
		}
	}
}

// newPage makes the order-detail page: one client per registered
// downstream, behind its guard, and the aggregator over them and the
// last-good store. It returns the downstreams by name too, for the control.
func newPage(cfg config.Serve, tel *telemetry.Telemetry, store *cache.Store, guards map[string]*resilience.Guard, closers *closeStack) (*orderdetail.Aggregator, map[string]*orderdetail.Downstream, error) {
	byName := map[string]*orderdetail.Downstream{}
	pc := orderdetail.Config{Store: store, CacheGuard: guards[config.NameCache], Reserve: cfg.Reserve, Observer: tel.Listener()}
	for _, e := range downstream.Registered() {
		d, _ := cfg.Dependencies.Get(e.Name)
		ds, closeClient, err := e.New(e, downstream.Config{BaseURL: cfg.URLs[e.Name], MaxIdleConns: 2 * d.Bulkhead.MaxConcurrent,
			WrapTransport: tel.WrapTransport}, guards[e.Name], d.CacheMaxAge)
		if err != nil {
			return nil, nil, fmt.Errorf("--%s-url: %w", e.Name, err)
		}
		closers.push(e.Name+" client", func(context.Context) error { closeClient(); return nil })
		byName[e.Name] = ds
		if e.Core {
			pc.Core = ds
		} else {
			pc.Sections = append(pc.Sections, ds)
		}
	}
	page, err := orderdetail.New(pc)
	return page, byName, err
}

// RunSim serves the simulated downstreams until ctx ends.
func RunSim(ctx context.Context, cfg config.Sim, env Env) error {
	logger := newLogger(env.Stderr, cfg.LogLevel)
	p := &program{logger: logger, allowed: cfg.AllowedHosts, failed: make(chan error, 1)}
	defer p.closers.closeAll(logger, 5*time.Second)
	s := sim.New(sim.WithLogger(logger))
	srv, err := p.serve("sim", cfg.Addr, func(g *handlers.HostGuard) http.Handler { return g.Wrap(s) })
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	srv.RegisterOnShutdown(s.Close)
	logger.Info("ready", "addr", srv.addr, "services", sim.Services())
	if env.OnReady != nil {
		env.OnReady(Addrs{Sim: srv.addr})
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
		return nil
	case err := <-p.failed:
		return err
	}
}
