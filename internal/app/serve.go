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
	"github.com/orderagg/orderagg/internal/registry"
	"github.com/orderagg/orderagg/internal/resilience"
	"github.com/orderagg/orderagg/internal/sim"
	"github.com/orderagg/orderagg/internal/status"
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
func Serve(ctx context.Context, cfg config.Serve, env Env) error {
	logger := newLogger(env.Stderr, cfg.SlogLevel())
	var ready atomic.Bool
	var closers closeStack
	defer closers.closeAll(logger, cfg.ShutdownTimeout)

	// Telemetry first, so it is flushed last, after the servers drained.
	// Telemetry reads the OTEL_* variables from the process environment
	// (contract §3), as the OpenTelemetry exporters themselves do.
	tel, err := telemetry.Setup(ctx, telemetry.Config{
		ServiceVersion: env.Version,
		Logger:         logger,
		SpanExporter:   env.SpanExporter,
	})
	if err != nil {
		return fmt.Errorf("%w: %w", config.ErrUsage, err)
	}
	closers.push("telemetry", tel.Shutdown)

	// Downstreams: the real ones, or the simulators in-process.
	var simSrv *sim.Server
	simAddr := ""
	if cfg.EmbeddedDownstreams() {
		simSrv = sim.New(sim.WithLogger(logger.With("component", "sim")))
		srv, addr, err := startHTTP("127.0.0.1:0", simSrv, httpTimeouts(cfg.Deadline, cfg.ReadHeaderTimeout), logger.With("server", "sim"))
		if err != nil {
			return fmt.Errorf("starting embedded simulators: %w", err)
		}
		srv.RegisterOnShutdown(simSrv.Close)
		closers.push("simulators", srv.Shutdown)
		simAddr = addr
		base := "http://" + addr
		cfg.URLs = config.SameURL(base)
		logger.Info("embedded demo mode: simulated downstreams in-process",
			"sim_addr", addr, "inject_fault", injectFault(base), "clear_faults", clearFaults(base))
	}

	store, err := cache.Open(ctx, cache.Config{URL: cfg.RedisURL}, logger)
	if err != nil {
		return fmt.Errorf("--redis-url: %w", err)
	}
	closers.push("cache", store.Close)
	if err := tel.InstrumentRedis(store.Client()); err != nil {
		return fmt.Errorf("instrumenting redis: %w", err)
	}
	if err := tel.ObserveCache(func() telemetry.CacheStats { return telemetry.CacheStats(store.Stats()) }); err != nil {
		return err
	}

	// One guard per dependency, from the one list of settings. An adaptive
	// sub-budget can use at most what a page leaves a call: the deadline
	// minus the reserve.
	guards := map[string]*resilience.Guard{}
	var ordered []*resilience.Guard
	listener := tel.Listener(logger)
	for _, name := range cfg.Dependencies.Names() {
		d, _ := cfg.Dependencies.Get(name)
		g, err := resilience.New(name, d.Config, resilience.WithListener(listener), resilience.WithCeiling(cfg.Deadline-cfg.Reserve))
		if err != nil {
			return err
		}
		guards[name] = g
		ordered = append(ordered, g)
	}
	if err := tel.ObserveGuards(ordered); err != nil {
		return err
	}

	// The page's sections, one per registered downstream, in page order.
	deps := cfg.Dependencies
	sections := map[string]orderdetail.Dependency{}
	var core orderdetail.Dependency
	var rest []orderdetail.Dependency
	for _, ds := range registry.Downstreams() {
		d, _ := deps.Get(ds.Name)
		section, closeClient, err := ds.Build(downstream.Config{
			BaseURL: cfg.URLs[ds.Name],
			// Twice the bulkhead: room for hedges and for connections
			// still closing.
			MaxConns:      2 * d.Bulkhead.MaxConcurrent,
			WrapTransport: tel.WrapTransport,
		}, guards[ds.Name], d.CacheMaxAge)
		if err != nil {
			return fmt.Errorf("--%s-url: %w", ds.Name, err)
		}
		closers.push(ds.Name+" client", func(context.Context) error { closeClient(); return nil })
		sections[ds.Name] = section
		if ds.Core {
			core = section
		} else {
			rest = append(rest, section)
		}
	}
	agg, err := orderdetail.New(orderdetail.Config{
		Core:     core,
		Sections: rest,
		// Reads reused for a moment: while a breaker is open, every page
		// of an order needs the same last-good entry (cache.Near).
		Store:      cache.NewNear(store, cache.NearConfig{Now: env.NearClock}),
		CacheGuard: guards[config.NameCache],
		Reserve:    cfg.Reserve,
		Observer:   tel.Observer(),
		// Popular orders are answered many times a second; one write per
		// section per order every 10 s keeps Redis load proportional to the
		// distinct orders, not the traffic (when the embedded server still
		// ran the newest-wins script in Lua, 1 s cost more CPU than the
		// page). A cached copy's as_of may trail the latest live
		// answer by up to 10 s — well inside every max age (60 s and up).
		RewriteInterval: 10 * time.Second,
	})
	if err != nil {
		return err
	}
	ctl := &control{deps: deps, deadline: cfg.Deadline, maxInflight: cfg.MaxInflight, guards: guards, sections: sections, logger: logger}
	ctl.warnUndersized("")

	report := func() status.Report { return status.Build(time.Now(), cfg.Deadline, ordered) }
	dashOpts := dashboard.Options{Report: report, Logger: logger, MaxStreams: cfg.MaxEventStreams}
	if simSrv != nil {
		dashOpts.Faults = simSrv // demo mode: the page can break a dependency
	}
	dash := dashboard.New(dashOpts)
	dash.Start() // the last minute, for a page opened later
	closers.push("dashboard", func(context.Context) error { dash.Close(); return nil })

	limiter, err := newLimiter(cfg)
	if err != nil {
		return fmt.Errorf("%w: --admission: %w", config.ErrUsage, err)
	}
	if err := tel.ObserveAdmission(limiter.Limit, limiter.Inflight); err != nil {
		return err
	}

	public := handlers.New(handlers.Options{
		Pager:       agg,
		Deadline:    cfg.Deadline,
		MaxInflight: cfg.MaxInflight,
		Limiter:     limiter,
		Report:      report,
		Dashboard:   dash,
		Ready:       ready.Load,
		Logger:      logger,
		Metrics:     tel.MetricsHandler(),
		Record:      tel.RecordRequest,
		Rejected:    tel.RecordRejected,
		Middleware:  []echo.MiddlewareFunc{tel.Middleware()},
	})
	apiSrv, apiAddr, err := startHTTP(cfg.Addr, public, httpTimeouts(cfg.Deadline, cfg.ReadHeaderTimeout), logger.With("server", "api"))
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	apiSrv.RegisterOnShutdown(dash.Close) // live streams would hold the drain open
	// Pushed last, so it is shut down first: stop taking requests and
	// finish those in flight before their dependencies go away.
	closers.push("api server", apiSrv.Shutdown)
	if err := tel.ObserveConnections("api", apiSrv.Open); err != nil {
		return err
	}

	adminAddr := ""
	if cfg.AdminAddr != "" {
		adminSrv, addr, err := startHTTP(cfg.AdminAddr, handlers.NewAdmin(ctl, cfg.AdminToken, logger), httpTimeouts(cfg.Deadline, cfg.ReadHeaderTimeout), logger.With("server", "admin"))
		if err != nil {
			return fmt.Errorf("--admin-addr: %w", err)
		}
		closers.push("admin server", adminSrv.Shutdown)
		if err := tel.ObserveConnections("admin", adminSrv.Open); err != nil {
			return err
		}
		adminAddr = addr
	}

	ready.Store(true)
	logger.Info("ready", "addr", apiAddr, "admin_addr", adminAddr, "deadline", cfg.Deadline, "config", cfg)
	if simAddr != "" {
		terminal := env.IsTerminal
		if terminal == nil {
			terminal = isTerminal
		}
		if w := env.Stderr; w != nil && terminal(w) {
			printDemoCommands(w, "http://"+simAddr, "http://"+apiAddr)
		}
	}
	if env.OnReady != nil {
		env.OnReady(Addrs{API: apiAddr, Admin: adminAddr, Sim: simAddr})
	}

	for {
		select {
		case <-ctx.Done():
			ready.Store(false)
			logger.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout.String())
			return nil
		case <-env.Reload:
			reload(cfg, ctl, logger)
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
