// Package testenv is for tests only: it decides whether they run in CI and
// what a missing prerequisite (a browser, a Redis server, Docker) does there,
// and renders the README's flag tables that tests compare. Production code
// never imports it.
package testenv

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/orderagg/orderagg/internal/config"
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

// FlagTable lists fs's flags as the README's tables do: flag, environment
// variable (prefix and the flag's name, as config.EnvName gives it),
// default, meaning.
func FlagTable(fs *flag.FlagSet, prefix string) string {
	b := "| flag | environment | default | meaning |\n|---|---|---|---|\n"
	fs.VisitAll(func(f *flag.Flag) {
		_, help := flag.UnquoteUsage(f)
		def := "empty"
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		b += fmt.Sprintf("| `--%s` | `%s` | %s | %s |\n", f.Name, config.EnvName(prefix, f.Name), def, help)
	})
	return b
}
