package loadtest

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/orderagg/orderagg/build/testenv"
	"github.com/orderagg/orderagg/internal/config"
)

// Table is the README's table of the flags, in the form serve's and sim's
// take, so it can be generated and kept in sync like theirs.
func Table() string {
	o := DefaultOptions()
	return testenv.FlagTable(flags(&o), config.EnvPrefix)
}

var update = flag.Bool("update", false, "rewrite the README's loadtest flag table")

// The README's loadtest table is generated from the flag definitions; this
// fails when a flag, default or help text changes without the README.
func TestREADMEFlagTable(t *testing.T) {
	raw, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start, end := "<!-- flags:loadtest -->\n", "<!-- /flags:loadtest -->"
	i, j := strings.Index(readme, start), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatal("README lacks the loadtest table markers")
	}
	got, want := readme[i+len(start):j], Table()
	if got != want && *update {
		if err := os.WriteFile("../../../../README.md", []byte(readme[:i+len(start)]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != want {
		t.Errorf("README's loadtest table is out of date; replace it with:\n%s", want)
	}
}
