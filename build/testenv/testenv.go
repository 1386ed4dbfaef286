// Package testenv is for tests only: it decides whether they run in CI and
// what a missing prerequisite (a browser, a Redis server, Docker) does there.
// Production code never imports it.
package testenv

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// MissingPrefix starts the message of every test stopped by Missing; the
// skip check of `make test` (build/skipcheck) fails a run that skipped one.
const MissingPrefix = "missing prerequisite: "

// InCI reports whether $CI holds a true value as strconv.ParseBool reads it
// (1, t, true, TRUE, ...); unset or unparsable is false.
func InCI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// Missing ends t because a prerequisite is missing: it fails in CI, where a
// skipped check would pass unseen, and skips elsewhere.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := MissingPrefix + fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
