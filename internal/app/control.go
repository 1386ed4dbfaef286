package app

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// control holds the per-dependency settings in force and applies changes
// (admin PATCHes, breaker overrides, SIGHUP reloads) to the live guards and
// sections, serialised by mu. Each guard swaps its settings atomically, so
// calls in flight finish under the settings they began with.
type control struct {
	mu   sync.Mutex
	deps config.Dependencies
	// loaded are the settings of the last load, kept from the first admin
	// PATCH on (zero before): a reload that changes what differs from them
	// undoes an operator's change.
	loaded      config.Dependencies
	bounds      config.Bounds
	maxInflight int // a bulkhead below what it admits is warned about
	guards      map[string]*resilience.Guard
	downstreams map[string]*orderdetail.Downstream // by dependency name; not for "cache"
	logger      *slog.Logger
}

var _ handlers.Control = (*control)(nil)

func (c *control) Settings() map[string]map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[string]any, len(c.guards))
	for _, name := range c.deps.Names() {
		d, _ := c.deps.Get(name)
		out[name] = d.Settings()
	}
	return out
}

func (c *control) Patch(dep string, body []byte) (map[string]any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next, err := c.deps.Patch(dep, body, c.bounds)
	if errors.Is(err, config.ErrUnknownDependency) {
		return nil, fmt.Errorf("%w: %s", handlers.ErrUnknownDependency, dep)
	}
	if err != nil {
		return nil, err
	}
	before, _ := c.deps.Get(dep)
	after, _ := next.Get(dep)
	if err := c.applyLocked(dep, after); err != nil {
		return nil, err
	}
	if _, ok := c.loaded.Get(dep); !ok {
		c.loaded = c.deps // the first PATCH: remember what the file said
	}
	c.logger.Info("settings changed", "source", "admin", "dependency", dep,
		"before", before.Settings(), "after", after.Settings())
	c.deps = next
	c.warnUndersized(dep)
	return after.Settings(), nil
}

// warnUndersized logs every bulkhead in force smaller than what
// --max-inflight admits, for the named dependency or, with "", for all: an
// operator may mean to cap a fragile dependency, but should know that its
// section degrades with REJECTED under load.
func (c *control) warnUndersized(only string) {
	for _, u := range c.deps.Undersized(c.maxInflight) {
		if only == "" || only == u.Dependency {
			c.logger.Warn("bulkhead smaller than the pages admitted: healthy calls will be REJECTED under load",
				"key", u.Key(), "max_concurrent", u.Have, "need", u.Need, "max_inflight", u.MaxInflight,
				"fix", "raise it to at least need, or lower --max-inflight")
		}
	}
}

// Reload puts a whole new set of settings in force, or none of it if any is
// invalid, and returns how many settings changed. It logs the changes, one
// line per dependency, and warns, naming each key, where it undoes a change
// made through the admin API since the last load.
func (c *control) Reload(next config.Dependencies) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := next.Validate(c.bounds); err != nil {
		return 0, err
	}
	changed := 0
	for _, name := range next.Names() {
		before, _ := c.deps.Get(name)
		after, _ := next.Get(name)
		changes := config.Changes(before, after)
		if len(changes) == 0 {
			continue
		}
		if err := c.applyLocked(name, after); err != nil {
			return changed, err // validated above: a bug
		}
		changed += len(changes)
		attrs := make([]any, 0, len(changes))
		for _, ch := range changes {
			attrs = append(attrs, slog.Group(ch.Key, "from", ch.From, "to", ch.To))
		}
		c.logger.Info("settings reloaded", "source", "config", "dependency", name, slog.Group("changed", attrs...))
		if loaded, ok := c.loaded.Get(name); ok {
			patched := map[string]bool{}
			for _, ch := range config.Changes(loaded, before) {
				patched[ch.Key] = true
			}
			for _, ch := range changes {
				if patched[ch.Key] {
					c.logger.Warn("config reload undoes an admin API change", "dependency", name, "key", ch.Key,
						"admin_value", ch.From, "config_value", ch.To)
				}
			}
		}
	}
	c.deps, c.loaded = next, config.Dependencies{}
	c.warnUndersized("")
	return changed, nil
}

// reloadFile re-reads cfg's --config file and puts it in force (SIGHUP);
// a bad file keeps the settings in force, and says so in the log.
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
		c.logger.Info("config reloaded", "file", cfg.ConfigFile, "settings_changed", changed)
	}
}

func (c *control) applyLocked(name string, d config.Dependency) error {
	if err := c.guards[name].Reconfigure(d.Config); err != nil {
		return err
	}
	if ds, ok := c.downstreams[name]; ok {
		ds.SetMaxAge(d.CacheMaxAge)
	}
	return nil
}

func (c *control) ForceBreaker(dep string, f resilience.Force) error {
	g, ok := c.guards[dep]
	if !ok {
		return fmt.Errorf("%w: %s", handlers.ErrUnknownDependency, dep)
	}
	g.ForceBreaker(f)
	c.logger.Warn("breaker override changed", "source", "admin", "dependency", dep,
		"force", [...]string{resilience.ForceNone: "none", resilience.ForceOpen: "open", resilience.ForceClosed: "closed"}[f],
		"breaker", g.Snapshot().Breaker.String())
	return nil
}
