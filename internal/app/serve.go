// Package app wires orderagg's parts into the running programs, Serve and
// RunSim. It owns every long-lived goroutine and closes what it opened,
// last first, on the way out; cmd/orderagg only parses arguments and
// signals, so tests run the real service in-process.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
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

// Env is what a program gets from its surroundings. Every field may be
// zero: logs go to os.Stderr, no reloads come, nobody is told, and spans go
// to the exporter OTEL_TRACES_EXPORTER names.
type Env struct {
	Stderr       io.Writer             // the structured logs, JSON lines
	Reload       <-chan os.Signal      // config reload requests (SIGHUP in main)
	OnReady      func(Addrs)           // told the bound addresses once serving
	Version      string                // the build's version, as service.version
	SpanExporter sdktrace.SpanExporter // every span, in place of OTEL_TRACES_EXPORTER's
}

// Addrs are the addresses a running program listens on.
type Addrs struct {
	API   string
	Admin string // empty when the admin API is off
	Sim   string // the simulators': RunSim's, or the embedded ones in demo mode
}

// newLogger writes JSON lines to w (os.Stderr when nil), each carrying the
// trace and span ids of its context, and durations as "1.5s".
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	if w == nil {
		w = os.Stderr
	}
	return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		},
	})))
}

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
		if simulator, addrs.Sim, err = p.serveSim(logger.With("component", "sim"), "127.0.0.1:0"); err != nil {
			return fmt.Errorf("starting embedded simulators: %w", err)
		}
		cfg.URLs = config.SameURL("http://" + addrs.Sim)
		logger.Info("embedded demo mode: simulated downstreams in-process", "sim_addr", addrs.Sim,
			"inject_fault", "curl -X PUT http://"+addrs.Sim+`/faults/logistics -d '{"hang":true}'`,
			"clear_faults", "curl -X DELETE http://"+addrs.Sim+"/faults")
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
		g, err := resilience.New(name, cfg.Dependencies[name].Config, resilience.WithListener(tel.Listener()),
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
	api, apiAddr, err := p.serve("api", cfg.Addr, func(g *handlers.HostGuard) http.Handler { opts.Guard = g; return handlers.New(opts) })
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	api.RegisterOnShutdown(dash.Close) // live streams would hold the drain open
	addrs.API = apiAddr
	if cfg.AdminAddr != "" {
		admin := func(g *handlers.HostGuard) http.Handler { return handlers.NewAdmin(ctl, cfg.AdminToken, g, logger) }
		if _, addrs.Admin, err = p.serve("admin", cfg.AdminAddr, admin); err != nil {
			return fmt.Errorf("--admin-addr: %w", err)
		}
	}
	if err := tel.Observe(gauges); err != nil {
		return err
	}

	ready.Store(true)
	defer ready.Store(false)
	logger.Info("ready", "addr", addrs.API, "admin_addr", addrs.Admin, "deadline", cfg.Deadline)
	if env.OnReady != nil {
		env.OnReady(addrs)
	}
	return p.wait(ctx, env.Reload, func() { ctl.reloadFile(cfg) })
}

// newPage makes the order-detail page: one client per registered
// downstream, behind its guard, and the aggregator over them and the
// last-good store. It returns the downstreams by name too, for the control.
func newPage(cfg config.Serve, tel *telemetry.Telemetry, store *cache.Store, guards map[string]*resilience.Guard, closers *closeStack) (*orderdetail.Aggregator, map[string]*orderdetail.Downstream, error) {
	byName := map[string]*orderdetail.Downstream{}
	pc := orderdetail.Config{Store: store, CacheGuard: guards[config.NameCache], Reserve: cfg.Reserve, Observer: tel.Listener(), Workers: pageWorkers}
	for _, e := range downstream.Registered() {
		d := cfg.Dependencies[e.Name]
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
	if err == nil {
		closers.push("page workers", func(context.Context) error { page.Close(); return nil })
	}
	return page, byName, err
}

// pageWorkers are the goroutines kept for the sections' calls: enough for
// 21 pages at once (3 sections each).
const pageWorkers = 64

// RunSim serves the simulated downstreams until ctx ends.
func RunSim(ctx context.Context, cfg config.Sim, env Env) error {
	logger := newLogger(env.Stderr, cfg.LogLevel)
	p := &program{logger: logger, allowed: cfg.AllowedHosts, failed: make(chan error, 1)}
	defer p.closers.closeAll(logger, 5*time.Second)
	_, addr, err := p.serveSim(logger, cfg.Addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	logger.Info("ready", "addr", addr, "services", sim.Services())
	if env.OnReady != nil {
		env.OnReady(Addrs{Sim: addr})
	}
	return p.wait(ctx, nil, nil)
}

func (p *program) serveSim(logger *slog.Logger, addr string) (*sim.Server, string, error) {
	s := sim.New(sim.WithLogger(logger))
	srv, bound, err := p.serve("sim", addr, func(g *handlers.HostGuard) http.Handler { return g.Wrap(s) })
	if err != nil {
		return nil, "", err
	}
	srv.RegisterOnShutdown(s.Close)
	return s, bound, nil
}
