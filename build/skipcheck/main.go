// Command skipcheck reads `go test -json` on standard input, prints it the
// way plain `go test` would (package lines, and the output of failed tests
// only), lists the skipped tests, and exits 1 in CI when a test was skipped
// for a missing prerequisite: a browser, a Redis server or Docker that CI
// is supposed to have, whose test would otherwise pass unseen as a skip.
//
// A missing prerequisite is a skip message with build/testenv's prefix
// or one of a few phrasings that name one (" on PATH", "not installed",
// "make deps", "make images"). Outside CI such skips are listed, not failed.
//
// Usage: go test -json ./... | tee build/out/test.json | skipcheck
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/orderagg/orderagg/build/testenv"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

var prerequisite = []string{testenv.MissingPrefix, " on PATH", "not installed", "make deps", "make images"}

type skip struct{ name, reason string }

type report struct {
	out                  io.Writer
	buf                  map[string][]string // package + test → its output so far
	passed, failed       int
	skipped, missingSkip []skip
}

func main() {
	r := &report{out: os.Stdout, buf: map[string][]string{}}
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var e event
			if json.Unmarshal(line, &e) != nil || e.Action == "" {
				r.out.Write(line) // not an event: pass it through
			} else {
				r.add(e)
			}
		}
		if err != nil {
			break
		}
	}
	os.Exit(r.summary(testenv.InCI()))
}

func (r *report) add(e event) {
	key := e.Package + " " + e.Test
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.out, e.Output)
	case e.Test == "" && e.Action == "output":
		if strings.HasPrefix(e.Output, "FAIL") {
			r.flush(e.Package) // a panic or timeout: the unfinished tests' output
		}
		if e.Output != "PASS\n" {
			fmt.Fprint(r.out, e.Output)
		}
	case e.Test == "":
	case e.Action == "output":
		r.buf[key] = append(r.buf[key], e.Output)
	case e.Action == "pass":
		r.passed++
		delete(r.buf, key)
	case e.Action == "fail":
		r.failed++
		r.print(key)
	case e.Action == "skip":
		s := skip{name: e.Package + "." + e.Test, reason: reason(r.buf[key])}
		r.skipped = append(r.skipped, s)
		if slices.ContainsFunc(prerequisite, func(p string) bool { return strings.Contains(s.reason, p) }) {
			r.missingSkip = append(r.missingSkip, s)
		}
		delete(r.buf, key)
	}
}

// print writes a finished test's output, without the === progress lines
// that plain go test leaves out.
func (r *report) print(key string) {
	for _, l := range r.buf[key] {
		if !strings.HasPrefix(strings.TrimLeft(l, " "), "=== ") {
			fmt.Fprint(r.out, l)
		}
	}
	delete(r.buf, key)
}

// flush prints the output of pkg's tests that never finished.
func (r *report) flush(pkg string) {
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for k := range r.buf {
			if strings.HasPrefix(k, pkg+" ") && !yield(k) {
				return
			}
		}
	}) {
		r.print(key)
	}
}

// reason is a skipped test's message: its output less the progress and
// --- SKIP lines.
func reason(lines []string) string {
	var b []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- SKIP") {
			b = append(b, t)
		}
	}
	return strings.Join(b, " ")
}

// summary prints the counts and the skips, and returns the exit status.
func (r *report) summary(inCI bool) int {
	fmt.Fprintf(r.out, "\ngo test: %d tests passed, %d failed, %d skipped\n", r.passed, r.failed, len(r.skipped))
	for _, s := range r.skipped {
		fmt.Fprintf(r.out, "  skipped %s: %s\n", s.name, s.reason)
	}
	if len(r.missingSkip) == 0 {
		return 0
	}
	fmt.Fprintf(r.out, "skipcheck: %d tests skipped for a missing prerequisite:\n", len(r.missingSkip))
	for _, s := range r.missingSkip {
		fmt.Fprintf(r.out, "  %s: %s\n", s.name, s.reason)
	}
	if !inCI {
		fmt.Fprintln(r.out, "skipcheck: (not in CI: listed, not failed; `make deps` and `make images` install them)")
		return 0
	}
	fmt.Fprintln(r.out, "skipcheck: FAIL: CI must have every prerequisite; install it in `make deps` or build it in `make images`")
	return 1
}
