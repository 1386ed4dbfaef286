package config

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's flag tables from the flag definitions, and config.example.yaml from the defaults")

// The README's configuration tables are generated from the flag definitions;
// this fails when a flag, default or help text changes without the README
// (go test -run TestREADMEConfigTables -update rewrites them).
func TestREADMEConfigTables(t *testing.T) {
	const path = "../../README.md"
	raw, err := os.ReadFile(path)
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
			if *update {
				readme = readme[:i+len(start)] + table + readme[j:]
				continue
			}
			t.Errorf("README's %s table is out of date; run go test ./internal/config -run TestREADMEConfigTables -update, or replace it with:\n%s", name, table)
		}
	}
	if *update {
		if err := os.WriteFile(path, []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
