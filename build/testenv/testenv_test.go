package testenv

import (
	"runtime"
	"testing"
)

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{"": false, "true": true, "1": true, "TRUE": true, "t": true, "false": false, "0": false, "yes": false} {
		t.Setenv("CI", v)
		if got := InCI(); got != want {
			t.Errorf("CI=%q: InCI() = %v, want %v", v, got, want)
		}
	}
}

// fakeT records how Missing ended it; like testing.T, Fatal and Skip end
// the goroutine.
type fakeT struct {
	testing.TB
	fatal, skip string
}

func (f *fakeT) Helper()           {}
func (f *fakeT) Fatal(args ...any) { f.fatal = args[0].(string); runtime.Goexit() }
func (f *fakeT) Skip(args ...any)  { f.skip = args[0].(string); runtime.Goexit() }

func missing(format string, args ...any) *fakeT {
	f := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Missing(f, format, args...)
	}()
	<-done
	return f
}

func TestMissingFailsInCIAndSkipsElsewhere(t *testing.T) {
	t.Setenv("CI", "1")
	if f := missing("no %s on PATH", "chromium"); f.fatal != MissingPrefix+"no chromium on PATH" || f.skip != "" {
		t.Errorf("CI=1: fatal %q, skip %q", f.fatal, f.skip)
	}
	t.Setenv("CI", "")
	if f := missing("no %s on PATH", "chromium"); f.skip != MissingPrefix+"no chromium on PATH" || f.fatal != "" {
		t.Errorf("CI unset: fatal %q, skip %q", f.fatal, f.skip)
	}
}
