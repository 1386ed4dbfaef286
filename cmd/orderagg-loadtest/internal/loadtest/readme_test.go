package loadtest

import (
	"os"
	"strings"
	"testing"

	"github.com/orderagg/orderagg/internal/config"
)

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
	if got, want := readme[i+len(start):j], config.MarkdownTable(Table()); got != want {
		t.Errorf("README's loadtest table is out of date; replace it with:\n%s", want)
	}
}
