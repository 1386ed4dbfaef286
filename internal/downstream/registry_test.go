package downstream

import (
	"regexp"
	"strings"
	"testing"
)

// The rules every entry must follow; a new downstream that breaks one
// fails here, not at start-up.
func TestRegistryIsWellFormed(t *testing.T) {
	name := regexp.MustCompile(`^[a-z][a-z0-9]*$`) // a flag, an env var, a YAML key and a label
	names, sections := map[string]bool{}, map[string]bool{}
	cores := 0
	for i, e := range Registered() {
		if !name.MatchString(e.Name) || !name.MatchString(e.Section) {
			t.Errorf("entry %d: name %q and section %q must match %s", i, e.Name, e.Section, name)
		}
		if e.Name == "cache" {
			t.Errorf("entry %d: %q is the last-good store's own guard", i, e.Name)
		}
		if names[e.Name] || sections[e.Section] {
			t.Errorf("entry %d: %q/%q registered twice", i, e.Name, e.Section)
		}
		names[e.Name], sections[e.Section] = true, true
		if e.Core {
			cores++
			if i != 0 {
				t.Errorf("the core %q must come first, it is entry %d", e.Name, i)
			}
		}
		if e.New == nil || e.CacheMaxAge <= 0 {
			t.Errorf("entry %q needs a builder and a positive cache max age", e.Name)
		}
		// config.example.yaml prints these as comments: one line each.
		if e.About == "" || e.Why["cache_max_age"] == "" {
			t.Errorf("entry %q needs About and the reason for its cache max age (Why)", e.Name)
		}
		for k, why := range e.Why {
			if why == "" || strings.ContainsAny(why+e.About, "\n") {
				t.Errorf("entry %q: the reason for %s, and About, must be one non-empty line", e.Name, k)
			}
		}
		if err := e.Defaults.WithDefaults().Validate(); err != nil {
			t.Errorf("entry %q: defaults invalid: %v", e.Name, err)
		}
	}
	if cores != 1 {
		t.Errorf("%d core downstreams, want exactly 1", cores)
	}
}
