package config

import (
	"os"
	"strings"
	"testing"
)

// The README's configuration tables are generated from the flag definitions;
// this fails when a flag, default or help text changes without the README.
func TestREADMEConfigTables(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	for name, table := range map[string]string{"serve": MarkdownTable(ServeTable()), "sim": MarkdownTable(SimTable())} {
		start, end := "<!-- flags:"+name+" -->\n", "<!-- /flags:"+name+" -->"
		i, j := strings.Index(readme, start), strings.Index(readme, end)
		if i < 0 || j < i {
			t.Fatalf("README lacks the %s table markers", name)
		}
		if got := readme[i+len(start) : j]; got != table {
			t.Errorf("README's %s table is out of date; replace it with:\n%s", name, table)
		}
	}
}
