package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// promDir holds the rules that ship with the service.
const promDir = "../deploy/prometheus"

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readRuleFile(t *testing.T, name string) ruleFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(promDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// TestAlertsPointAtTheirRunbookSection: every alert carries summary,
// description, severity and a runbook_url whose anchor is a heading of
// docs/runbook.md named after the alert, and the runbook's alert table lists
// it. An operator paged at night must land on the section that handles it.
func TestAlertsPointAtTheirRunbookSection(t *testing.T) {
	doc, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	runbook := string(doc)
	anchors := map[string]bool{}
	heading := regexp.MustCompile(`(?m)^#{2,4} (.+)$`)
	for _, h := range heading.FindAllStringSubmatch(runbook, -1) {
		anchors[githubAnchor(h[1])] = true
	}
	const base = "https://github.com/orderagg/orderagg/blob/main/docs/runbook.md#"
	var alerts []string
	for _, g := range readRuleFile(t, "alerts.yaml").Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: alerts.yaml holds a recording rule %q; put it in rules.yaml", g.Name, r.Record)
				continue
			}
			alerts = append(alerts, r.Alert)
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, k)
				}
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], base)
			switch {
			case !ok:
				t.Errorf("%s: runbook_url %q is not under %s", r.Alert, r.Annotations["runbook_url"], base)
			case anchor != strings.ToLower(r.Alert):
				t.Errorf("%s: runbook_url anchor %q, want its own section #%s", r.Alert, anchor, strings.ToLower(r.Alert))
			case !anchors[anchor]:
				t.Errorf("%s: docs/runbook.md has no heading for #%s", r.Alert, anchor)
			}
			if !strings.Contains(runbook, "| `"+r.Alert+"` |") {
				t.Errorf("%s is not in the runbook's alert table", r.Alert)
			}
		}
	}
	if len(alerts) < 10 {
		t.Errorf("found only %d alerts: %v", len(alerts), alerts)
	}
	slices.Sort(alerts)
	if c := slices.Compact(slices.Clone(alerts)); len(c) != len(alerts) {
		t.Errorf("an alert name is used twice: %v", alerts)
	}
}

// githubAnchor is the fragment GitHub gives a Markdown heading: lower case,
// punctuation dropped, spaces to hyphens.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
