package config

import (
	"errors"
	"strings"
	"testing"
)

func TestErrorHelpers(t *testing.T) {
	base := errors.New("base")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"one line stays", oneLine(base), "base"},
		{"multi-line folds", oneLine(errors.New("yaml: unmarshal errors:\n  line 3: cannot unmarshal")), "yaml: unmarshal errors: line 3: cannot unmarshal"},
		{"under prefixes plain key errors", under("dependencies.coupon", errors.Join(errors.New("timeout: bad"), errors.New("retry.backoff: bad"))),
			"dependencies.coupon.timeout: bad; dependencies.coupon.retry.backoff: bad"},
		{"under prefixes keyErrors", under("dependencies.order", &keyError{key: "timeout", line: 3, err: base}), "dependencies.order.timeout: base (line 3)"},
		{"join of nothing", join(nil), "<nil>"},
	}
	for _, tc := range tests {
		got := "<nil>"
		if tc.err != nil {
			got = tc.err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if tc.err != nil && strings.Contains(got, "\n") {
			t.Errorf("%s: not one line: %q", tc.name, got)
		}
	}
	// The chain survives every wrapper.
	wrapped := usage(under("dependencies.order", errors.Join(oneLine(errors.New("a\nb")), &keyError{key: "k", err: base})))
	if !errors.Is(wrapped, base) || !errors.Is(wrapped, ErrUsage) {
		t.Errorf("chain lost: %v", wrapped)
	}
	if usage(wrapped) != wrapped || usage(nil) != nil {
		t.Error("usage wraps twice or wraps nil")
	}
}

// must returns the named dependency's settings, which the test knows exist.
func must(d Dependencies, name string) Dependency {
	dep, ok := d.Get(name)
	if !ok {
		panic("no dependency " + name)
	}
	return dep
}
