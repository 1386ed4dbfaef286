package app

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// control is the admin API's handlers.Control, and applies SIGHUP reloads.
// It holds the per-dependency settings in force; changes are serialised by
// mu, and each guard swaps its settings atomically, so calls in flight
// finish under the settings they began with.
type control struct {
	mu          sync.Mutex
	deps        config.Dependencies
	bounds      config.Bounds
	guards      map[string]*resilience.Guard
	downstreams map[string]*orderdetail.Downstream // by dependency name; not for "cache"
	logger      *slog.Logger
}

func (c *control) Settings() map[string]map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]map[string]any{}
	for name, d := range c.deps {
		out[name] = d.Settings()
	}
	return out
}

func (c *control) Patch(dep string, body []byte) (map[string]any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next, err := c.deps.Patch(dep, body, c.bounds)
	if err != nil {
		return nil, err
	}
	if _, err := c.putLocked(next, "admin", "settings changed"); err != nil {
		return nil, err
	}
	return next[dep].Settings(), nil
}

// putLocked puts next, validated, in force: each dependency whose settings
// change is reconfigured and logged as msg with its before and after. It
// returns how many changed, or the error of a guard that refused its
// settings, which stops it there.
func (c *control) putLocked(next config.Dependencies, source, msg string) (changed int, err error) {
	for _, name := range next.Names() {
		before, after := c.deps[name], next[name]
		if before == after {
			continue
		}
		if err := c.guards[name].Reconfigure(after.Config); err != nil {
			return changed, err
		}
		if ds, ok := c.downstreams[name]; ok {
			ds.SetMaxAge(after.CacheMaxAge)
		}
		changed++
		c.logger.Info(msg, "source", source, "dependency", name, "before", before.Settings(), "after", after.Settings())
	}
	c.deps = next
	return changed, nil
}

// reloadFile puts cfg's --config file in force, re-read and validated; a
// bad file keeps the settings in force and is logged. Without a file it
// does nothing.
func (c *control) reloadFile(cfg config.Serve) {
	if cfg.ConfigFile == "" {
		c.logger.Info("reload requested but no --config file is set; nothing to do")
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next, err := cfg.LoadDependencies()
	changed := 0
	if err == nil {
		changed, err = c.putLocked(next, "config", "settings reloaded")
	}
	if err != nil {
		c.logger.Error("config reload failed; keeping the settings in force", "file", cfg.ConfigFile, "err", err)
		return
	}
	c.logger.Info("config reloaded", "file", cfg.ConfigFile, "dependencies_changed", changed)
}

func (c *control) ForceBreaker(dep string, f resilience.Force) error {
	g, ok := c.guards[dep]
	if !ok {
		return fmt.Errorf("%w %q", config.ErrUnknownDependency, dep)
	}
	g.ForceBreaker(f)
	c.logger.Warn("breaker override changed", "source", "admin", "dependency", dep, "breaker", g.Snapshot().Breaker.String())
	return nil
}
