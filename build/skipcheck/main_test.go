package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// run feeds skipcheck a go test -json stream and returns what it printed
// and its exit status.
func run(t *testing.T, inCI bool, events ...event) (string, int) {
	t.Helper()
	var out strings.Builder
	r := &report{out: &out, buf: map[string][]string{}}
	for _, e := range events {
		b, _ := json.Marshal(e)
		var back event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		r.add(back)
	}
	code := r.summary(inCI)
	return out.String(), code
}

func skipped(test, msg string) []event {
	return []event{
		{Action: "run", Package: "p", Test: test},
		{Action: "output", Package: "p", Test: test, Output: "=== RUN   " + test + "\n"},
		{Action: "output", Package: "p", Test: test, Output: "    x_test.go:9: " + msg + "\n"},
		{Action: "output", Package: "p", Test: test, Output: "--- SKIP: " + test + " (0.00s)\n"},
		{Action: "skip", Package: "p", Test: test},
	}
}

// A skip for a missing prerequisite fails a CI run and only a CI run; a
// skip for another reason (-short, a long simulation) fails nothing.
func TestMissingPrerequisiteSkipFailsCI(t *testing.T) {
	for _, msg := range []string{"missing prerequisite: no chromium on PATH", "no curl on PATH", "skipping: build the images with `make images`"} {
		out, code := run(t, true, skipped("TestBrowser", msg)...)
		if code != 1 || !strings.Contains(out, "p.TestBrowser: x_test.go:9: "+msg) {
			t.Errorf("CI, skip %q: exit %d, output:\n%s", msg, code, out)
		}
		if _, code := run(t, false, skipped("TestBrowser", msg)...); code != 0 {
			t.Errorf("not CI, skip %q: exit %d, want 0", msg, code)
		}
	}
	if out, code := run(t, true, skipped("TestLong", "long simulation")...); code != 0 || !strings.Contains(out, "1 skipped") {
		t.Errorf("CI, an ordinary skip: exit %d, output:\n%s", code, out)
	}
}

// The output is plain go test's: a passing test's log and the progress
// lines are left out, a failing test's log is shown.
func TestOutputIsPlainGoTest(t *testing.T) {
	out, code := run(t, true,
		event{Action: "output", Package: "p", Test: "TestOK", Output: "=== RUN   TestOK\n"},
		event{Action: "output", Package: "p", Test: "TestOK", Output: "    a_test.go:1: quiet\n"},
		event{Action: "pass", Package: "p", Test: "TestOK"},
		event{Action: "output", Package: "p", Test: "TestBad", Output: "    a_test.go:2: loud\n"},
		event{Action: "output", Package: "p", Test: "TestBad", Output: "--- FAIL: TestBad (0.00s)\n"},
		event{Action: "fail", Package: "p", Test: "TestBad"},
		event{Action: "output", Package: "p", Output: "FAIL\tp\t0.01s\n"},
		event{Action: "fail", Package: "p"},
	)
	if code != 0 || strings.Contains(out, "quiet") || strings.Contains(out, "=== RUN") ||
		!strings.Contains(out, "loud\n--- FAIL: TestBad") || !strings.Contains(out, "1 tests passed, 1 failed, 0 skipped") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}
