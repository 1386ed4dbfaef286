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
	out := make(map[string]map[string]any, len(c.deps))
	for name, d := range c.deps {
		out[name] = d.Settings()
	}
	return out
}

func (c *control) Patch(dep string, body []byte) (map[string]any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next, err := c.deps.Patch(dep, body, c.bounds)
	if err == nil {
		_, err = c.putLocked(next, "admin", "settings changed")
	}
	if err != nil {
		return nil, err
	}
	return next[dep].Settings(), nil
}

// Reload puts a whole new set of settings in force, or none of it if any is
// invalid, and returns how many dependencies' settings changed.
func (c *control) Reload(next config.Dependencies) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := next.Validate(c.bounds); err != nil {
		return 0, err
	}
	return c.putLocked(next, "config", "settings reloaded")
}

// putLocked puts next, valid, in force: each dependency whose settings
// change is reconfigured and logged as msg with its before and after.
func (c *control) putLocked(next config.Dependencies, source, msg string) (changed int, err error) {
	for _, name := range next.Names() {
		before, after := c.deps[name], next[name]
		if before == after {
			continue
		}
		if err := c.guards[name].Reconfigure(after.Config); err != nil {
			return changed, err // validated: a bug
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

// reloadFile re-reads cfg's --config file and puts it in force; a bad file
// keeps the settings in force, and says so in the log.
func (c *control) reloadFile(cfg config.Serve) {
	if cfg.ConfigFile == "" {
		c.logger.Info("reload requested but no --config file is set; nothing to do")
		return
	}
	next, err := cfg.LoadDependencies()
	changed := 0
	if err == nil {
		changed, err = c.Reload(next)
	}
	if err != nil {
		c.logger.Error("config reload failed; keeping the settings in force", "file", cfg.ConfigFile, "err", err)
	} else {
		c.logger.Info("config reloaded", "file", cfg.ConfigFile, "dependencies_changed", changed)
	}
}

func (c *control) ForceBreaker(dep string, f resilience.Force) error {
	g, ok := c.guards[dep]
	if !ok {
		return fmt.Errorf("%w %q", config.ErrUnknownDependency, dep)
	}
	g.ForceBreaker(f)
	c.logger.Warn("breaker override changed", "source", "admin", "dependency", dep,
		"force", [...]string{resilience.ForceNone: "none", resilience.ForceOpen: "open", resilience.ForceClosed: "closed"}[f],
		"breaker", g.Snapshot().Breaker.String())
	return nil
}
