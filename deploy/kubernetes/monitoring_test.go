package kubernetes

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

//go:generate go test -run ^TestPrometheusRule$ -update .

const (
	monitoringDir  = "components/monitoring"
	prometheusRule = monitoringDir + "/prometheusrule.yaml"
	serviceMonitor = monitoringDir + "/servicemonitor.yaml"
)

// ruleFiles are the rule files the PrometheusRule holds, in its order.
var ruleFiles = []string{repoRoot + "/deploy/prometheus/rules.yaml", repoRoot + "/deploy/prometheus/alerts.yaml"}

const prometheusRuleHeader = `# GENERATED from deploy/prometheus/rules.yaml and alerts.yaml: edit those,
# then regenerate with
#   cd deploy/kubernetes && go generate
# (TestPrometheusRule fails while this file differs from a fresh generation).
`

// renderPrometheusRule builds the PrometheusRule: the rule groups of every
// file of ruleFiles, in order, as they are written there (block scalars and
// comments kept).
func renderPrometheusRule(t *testing.T) []byte {
	t.Helper()
	groups := &yaml.Node{Kind: yaml.SequenceNode}
	for _, f := range ruleFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		root := doc.Content[0]
		if root.Kind != yaml.MappingNode || len(root.Content) != 2 || root.Content[0].Value != "groups" {
			t.Fatalf("%s: want a file of one key, groups", f)
		}
		groups.Content = append(groups.Content, root.Content[1].Content...)
	}
	str := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }
	mapping := func(kv ...*yaml.Node) *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Content: kv} }
	obj := mapping(
		str("apiVersion"), str("monitoring.coreos.com/v1"),
		str("kind"), str("PrometheusRule"),
		str("metadata"), mapping(
			str("name"), str("orderagg"),
			str("labels"), mapping(
				str("app.kubernetes.io/name"), str("orderagg"),
				str("app.kubernetes.io/component"), str("api"),
			),
		),
		str("spec"), mapping(str("groups"), groups),
	)
	var out bytes.Buffer
	out.WriteString(prometheusRuleHeader)
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(obj); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestPrometheusRule: the component's PrometheusRule is a fresh generation
// from deploy/prometheus, and holds every group and rule of both files;
// -update rewrites it.
func TestPrometheusRule(t *testing.T) {
	want := renderPrometheusRule(t)
	if *update {
		if err := os.WriteFile(prometheusRule, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(prometheusRule)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatalf("%s differs from a generation from %v; run: cd deploy/kubernetes && go generate", prometheusRule, ruleFiles)
	}

	// The same rules, value for value (block scalars and comments aside).
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := sigsyaml.UnmarshalStrict(have, &pr); err != nil {
		t.Fatalf("%s: %v", prometheusRule, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("%s: %s %s, want monitoring.coreos.com/v1 PrometheusRule", prometheusRule, pr.APIVersion, pr.Kind)
	}
	var groups []any
	for _, f := range ruleFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Groups []any `json:"groups"`
		}
		if err := sigsyaml.UnmarshalStrict(b, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		groups = append(groups, r.Groups...)
	}
	if len(groups) == 0 || !reflect.DeepEqual(pr.Spec.Groups, groups) {
		t.Errorf("%s: spec.groups differ from the groups of %v", prometheusRule, ruleFiles)
	}
}

// TestServiceMonitor: the ServiceMonitor selects the Service and scrapes a
// port it names, at /metrics.
func TestServiceMonitor(t *testing.T) {
	s := load(t)
	b, err := os.ReadFile(serviceMonitor)
	if err != nil {
		t.Fatal(err)
	}
	var sm struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port          string `json:"port"`
				Path          string `json:"path"`
				Interval      string `json:"interval"`
				ScrapeTimeout string `json:"scrapeTimeout"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	if err := sigsyaml.UnmarshalStrict(b, &sm); err != nil {
		t.Fatalf("%s: %v", serviceMonitor, err)
	}
	if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Kind != "ServiceMonitor" {
		t.Errorf("%s: %s %s", serviceMonitor, sm.APIVersion, sm.Kind)
	}
	if len(sm.Spec.Selector.MatchLabels) == 0 {
		t.Fatal("the ServiceMonitor selects every Service")
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if s.svc.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the Service's labels %v", k, v, s.svc.Labels)
		}
	}
	var ports []string
	for _, p := range s.svc.Spec.Ports {
		ports = append(ports, p.Name)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	e := sm.Spec.Endpoints[0]
	if !slices.Contains(ports, e.Port) || e.Path != "/metrics" {
		t.Errorf("endpoint port %q path %q, want one of the Service's ports %v at /metrics", e.Port, e.Path, ports)
	}
}

// TestMonitoringComponent: the base lists no component (it applies without
// the operator's CRDs); an overlay that adds components/monitoring renders
// the base's objects plus the ServiceMonitor and the PrometheusRule.
func TestMonitoringComponent(t *testing.T) {
	s := load(t)
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kusttypes.Kustomization
	if err := sigsyaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if len(k.Components) != 0 {
		t.Errorf("the base lists components %v: it would not apply without the Prometheus Operator", k.Components)
	}

	fs := filesys.MakeFsInMemory()
	copyTo := func(dst string, files ...string) {
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := fs.WriteFile(filepath.Join(dst, f), b); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyTo("/base", append(slices.Clone(s.files), "kustomization.yaml")...)
	comp, err := filepath.Glob(monitoringDir + "/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	copyTo("/base", comp...)
	overlay := "resources: [../base]\ncomponents: [../base/" + monitoringDir + "]\n"
	if err := fs.WriteFile("/prod/kustomization.yaml", []byte(overlay)); err != nil {
		t.Fatal(err)
	}
	out, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/prod")
	if err != nil {
		t.Fatalf("kustomize build of an overlay with %s: %v", monitoringDir, err)
	}
	var kinds []string
	for _, r := range out.Resources() {
		kinds = append(kinds, r.GetKind())
		if r.GetKind() == "PrometheusRule" {
			y, err := r.AsYAML()
			if err != nil {
				t.Fatal(err)
			}
			var pr struct {
				Spec struct {
					Groups []any `json:"groups"`
				} `json:"spec"`
			}
			if err := sigsyaml.Unmarshal(y, &pr); err != nil || len(pr.Spec.Groups) == 0 {
				t.Errorf("rendered PrometheusRule without groups (%v)", err)
			}
		}
	}
	slices.Sort(kinds)
	want := []string{"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "PrometheusRule", "Service", "ServiceMonitor"}
	if !slices.Equal(kinds, want) {
		t.Errorf("rendered kinds %v, want %v", kinds, want)
	}
}
