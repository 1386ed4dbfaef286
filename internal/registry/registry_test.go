package registry

import (
	"regexp"
	"testing"
)

// The rules every entry must follow; a new downstream that breaks one
// fails here, not at start-up.
func TestRegistryIsWellFormed(t *testing.T) {
	name := regexp.MustCompile(`^[a-z][a-z0-9]*$`) // a flag, an env var, a YAML key and a label
	names, sections := map[string]bool{}, map[string]bool{}
	cores := 0
	for i, d := range Downstreams() {
		if !name.MatchString(d.Name) || !name.MatchString(d.Section) {
			t.Errorf("entry %d: name %q and section %q must match %s", i, d.Name, d.Section, name)
		}
		if d.Name == "cache" {
			t.Errorf("entry %d: %q is the last-good store's own guard", i, d.Name)
		}
		if names[d.Name] || sections[d.Section] {
			t.Errorf("entry %d: %q/%q registered twice", i, d.Name, d.Section)
		}
		names[d.Name], sections[d.Section] = true, true
		if d.Core {
			cores++
			if i != 0 {
				t.Errorf("the core %q must come first, it is entry %d", d.Name, i)
			}
		}
		if d.New == nil || d.CacheMaxAge <= 0 {
			t.Errorf("entry %q needs a builder and a positive cache max age", d.Name)
		}
		if err := d.Defaults.WithDefaults().Validate(); err != nil {
			t.Errorf("entry %q: defaults invalid: %v", d.Name, err)
		}
		if got, ok := Lookup(d.Name); !ok || got.Name != d.Name {
			t.Errorf("Lookup(%q) = %v, %v", d.Name, got.Name, ok)
		}
	}
	if cores != 1 {
		t.Errorf("%d core downstreams, want exactly 1", cores)
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup of an unregistered name succeeded")
	}
}
