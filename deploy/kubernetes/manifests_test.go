// Package kubernetes holds orderagg's Kubernetes manifests and the test that
// keeps them honest. It is its own Go module so that the Kubernetes libraries
// never enter the service's go.mod.
//
// The test decodes every manifest strictly into the typed k8s.io/api objects
// (an unknown or duplicated field fails), checks that the objects agree with
// each other and with the service (probes, ports, labels, shutdown timing,
// resources, the ConfigMap equal to config.example.yaml), renders the
// kustomization with kustomize's own library (and an image override), and
// finally runs the real orderagg binary with the Deployment's arguments and
// environment to see its probes answer and its shutdown end in time.
//
// After regenerating config.example.yaml (go generate ./internal/config
// at the repository root), regenerate the ConfigMap and the
// Deployment's config checksum with go generate (here), which runs:
//
//	go test -run ^TestConfigMap$ -update
package kubernetes

//go:generate go test -run ^TestConfigMap$ -update .

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite configmap.yaml from config.example.yaml, and the Deployment's config checksum")

const (
	repoRoot      = "../.."
	exampleConfig = repoRoot + "/config.example.yaml"
	configKey     = "config.yaml"
	checksumKey   = "orderagg.dev/config-sha256"
	containerName = "orderagg"
	apiPort       = 8080
	// The service's defaults (internal/config), used when the Deployment
	// does not set the variable.
	defaultDeadline        = 1500 * time.Millisecond
	defaultShutdownTimeout = 10 * time.Second
)

// set is every manifest of this directory, decoded.
type set struct {
	files  []string
	deploy *appsv1.Deployment
	svc    *corev1.Service
	hpa    *autoscalingv2.HorizontalPodAutoscaler
	pdb    *policyv1.PodDisruptionBudget
	cm     *corev1.ConfigMap
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, autoscalingv2.AddToScheme, policyv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// decodeStrict decodes one Kubernetes object; unknown fields, duplicated
// fields and kinds outside the scheme are errors.
func decodeStrict(doc []byte) (runtime.Object, error) {
	codecs := serializer.NewCodecFactory(scheme, serializer.EnableStrict)
	obj, _, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
	return obj, err
}

// documents splits a YAML stream into its non-empty documents.
func documents(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return nil, err
		}
		if len(probe) > 0 {
			docs = append(docs, doc)
		}
	}
}

func load(t *testing.T) *set {
	t.Helper()
	paths, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := &set{}
	for _, p := range paths {
		if p == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := documents(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(docs) != 1 {
			t.Fatalf("%s holds %d objects; keep one per file", p, len(docs))
		}
		obj, err := decodeStrict(docs[0])
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		dup := func() { t.Fatalf("%s: a second %T", p, obj) }
		switch o := obj.(type) {
		case *appsv1.Deployment:
			if s.deploy != nil {
				dup()
			}
			s.deploy = o
		case *corev1.Service:
			if s.svc != nil {
				dup()
			}
			s.svc = o
		case *autoscalingv2.HorizontalPodAutoscaler:
			if s.hpa != nil {
				dup()
			}
			s.hpa = o
		case *policyv1.PodDisruptionBudget:
			if s.pdb != nil {
				dup()
			}
			s.pdb = o
		case *corev1.ConfigMap:
			if s.cm != nil {
				dup()
			}
			s.cm = o
		default:
			t.Fatalf("%s: unexpected kind %T", p, obj)
		}
		s.files = append(s.files, p)
	}
	for name, missing := range map[string]bool{
		"Deployment": s.deploy == nil, "Service": s.svc == nil, "HorizontalPodAutoscaler": s.hpa == nil,
		"PodDisruptionBudget": s.pdb == nil, "ConfigMap": s.cm == nil,
	} {
		if missing {
			t.Fatalf("no %s manifest", name)
		}
	}
	return s
}

func (s *set) container(t *testing.T) *corev1.Container {
	t.Helper()
	cs := s.deploy.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != containerName {
		t.Fatalf("want one container %q, got %d", containerName, len(cs))
	}
	return &cs[0]
}

func envValue(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func durationEnv(t *testing.T, c *corev1.Container, name string, def time.Duration) time.Duration {
	t.Helper()
	v, ok := envValue(c, name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// containerPort resolves a probe's or a Service's port to a number.
func containerPort(t *testing.T, c *corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("no container port named %q", p.StrVal)
	return 0
}

func TestDeployment(t *testing.T) {
	s := load(t)
	d := s.deploy
	c := s.container(t)
	pod := d.Spec.Template.Spec

	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", d.Spec.Replicas)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the Deployment's selector %v does not select its own pods %v (%v)", d.Spec.Selector, d.Spec.Template.Labels, err)
	}
	if c.Image != "orderagg:local" {
		t.Errorf("image %q, want orderagg:local (override it with kustomize)", c.Image)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("args %v must start with serve", c.Args)
	}

	t.Run("port", func(t *testing.T) {
		if len(c.Ports) != 1 || c.Ports[0].ContainerPort != apiPort || c.Ports[0].Name != "http" {
			t.Fatalf("ports %+v, want http %d", c.Ports, apiPort)
		}
		addr, _ := envValue(c, "ORDERAGG_ADDR")
		if _, port, err := net.SplitHostPort(addr); err != nil || port != strconv.Itoa(apiPort) {
			t.Fatalf("ORDERAGG_ADDR %q does not listen on %d", addr, apiPort)
		}
	})

	t.Run("probes", func(t *testing.T) {
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{
			{"readiness", c.ReadinessProbe, "/readyz"},
			{"liveness", c.LivenessProbe, "/healthz"},
			{"startup", c.StartupProbe, "/healthz"},
		} {
			if p.probe == nil || p.probe.HTTPGet == nil {
				t.Errorf("%s probe: want an HTTP GET", p.name)
				continue
			}
			if p.probe.HTTPGet.Path != p.path || containerPort(t, c, p.probe.HTTPGet.Port) != apiPort {
				t.Errorf("%s probe: %s on %v, want %s on %d", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path, apiPort)
			}
		}
		// The startup probe must give the process time; liveness must not
		// restart a busy but alive pod after one slow answer.
		if sp := c.StartupProbe; sp != nil && sp.PeriodSeconds*sp.FailureThreshold < 10 {
			t.Errorf("startup probe allows only %ds", sp.PeriodSeconds*sp.FailureThreshold)
		}
		if lp := c.LivenessProbe; lp != nil && lp.FailureThreshold < 3 {
			t.Errorf("liveness failureThreshold %d: one hiccup restarts the pod", lp.FailureThreshold)
		}
	})

	t.Run("environment", func(t *testing.T) {
		// One URL for every registered downstream, so registering a fifth
		// needs no edit here; empty would mean demo mode.
		schemes := map[string][]string{
			"ORDERAGG_DOWNSTREAMS_URL": {"http", "https"},
			"ORDERAGG_REDIS_URL":       {"redis", "rediss"},
		}
		for name, allowed := range schemes {
			v, ok := envValue(c, name)
			if !ok || v == "" {
				t.Errorf("%s is not set: the downstreams and Redis must be (empty means demo mode)", name)
				continue
			}
			u, err := url.Parse(v)
			if err != nil || !slices.Contains(allowed, u.Scheme) || u.Hostname() == "" || u.RawQuery != "" {
				t.Errorf("%s=%q is not a %v URL the service accepts", name, v, allowed)
			}
		}
		seen := map[string]bool{}
		for _, e := range c.Env {
			if seen[e.Name] {
				t.Errorf("%s is set twice", e.Name)
			}
			seen[e.Name] = true
		}
	})

	t.Run("config volume", func(t *testing.T) {
		i := slices.Index(c.Args, "--config")
		if i < 0 || i+1 >= len(c.Args) {
			t.Fatalf("args %v lack --config FILE", c.Args)
		}
		file := c.Args[i+1]
		var mount *corev1.VolumeMount
		for j := range c.VolumeMounts {
			if filepath.Dir(file) == c.VolumeMounts[j].MountPath {
				mount = &c.VolumeMounts[j]
			}
		}
		if mount == nil || !mount.ReadOnly {
			t.Fatalf("no read-only volume mounted at %s", filepath.Dir(file))
		}
		var vol *corev1.Volume
		for j := range pod.Volumes {
			if pod.Volumes[j].Name == mount.Name {
				vol = &pod.Volumes[j]
			}
		}
		if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != s.cm.Name {
			t.Fatalf("volume %q is not the ConfigMap %q", mount.Name, s.cm.Name)
		}
		found := len(vol.ConfigMap.Items) == 0 && filepath.Base(file) == configKey
		for _, it := range vol.ConfigMap.Items {
			found = found || it.Key == configKey && it.Path == filepath.Base(file)
		}
		if !found {
			t.Fatalf("%s is not the ConfigMap's %s", file, configKey)
		}
	})

	t.Run("resources", func(t *testing.T) {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[name]
			lim, hasLim := c.Resources.Limits[name]
			if !hasReq || !hasLim || req.IsZero() {
				t.Errorf("%s: want a request and a limit, got %v / %v", name, c.Resources.Requests, c.Resources.Limits)
				continue
			}
			if lim.Cmp(req) < 0 {
				t.Errorf("%s: limit %s below request %s", name, lim.String(), req.String())
			}
		}
		// Measured resident set: 31-43 MiB under load; the request must hold it.
		if mem := c.Resources.Requests[corev1.ResourceMemory]; mem.Cmp(resource.MustParse("64Mi")) < 0 {
			t.Errorf("memory request %s is below the measured working set", mem.String())
		}
	})

	t.Run("security", func(t *testing.T) {
		psc, csc := pod.SecurityContext, c.SecurityContext
		if psc == nil || csc == nil {
			t.Fatal("pod and container need a securityContext")
		}
		nonRoot := psc.RunAsNonRoot != nil && *psc.RunAsNonRoot || csc.RunAsNonRoot != nil && *csc.RunAsNonRoot
		uid := psc.RunAsUser
		if csc.RunAsUser != nil {
			uid = csc.RunAsUser
		}
		if !nonRoot || uid == nil || *uid == 0 {
			t.Errorf("must run as a non-root uid (runAsNonRoot %v, runAsUser %v)", nonRoot, uid)
		}
		if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
			t.Error("root filesystem must be read-only")
		}
		if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
			t.Error("allowPrivilegeEscalation must be false")
		}
		if csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
			t.Error("capabilities must drop ALL")
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Error("the service never calls the Kubernetes API: do not mount a token")
		}
	})

	t.Run("shutdown", func(t *testing.T) {
		deadline := durationEnv(t, c, "ORDERAGG_DEADLINE", defaultDeadline)
		drain := durationEnv(t, c, "ORDERAGG_SHUTDOWN_TIMEOUT", defaultShutdownTimeout)
		ps := c.Lifecycle
		if ps == nil || ps.PreStop == nil || ps.PreStop.Sleep == nil || ps.PreStop.Sleep.Seconds <= 0 {
			t.Fatal("want a preStop sleep, so endpoints are removed before SIGTERM (the image has no shell: use the sleep action)")
		}
		preStop := time.Duration(ps.PreStop.Sleep.Seconds) * time.Second
		if drain <= deadline {
			t.Errorf("--shutdown-timeout %v must exceed --deadline %v, or requests in flight are cut", drain, deadline)
		}
		grace := time.Duration(0)
		if g := pod.TerminationGracePeriodSeconds; g != nil {
			grace = time.Duration(*g) * time.Second
		}
		if grace <= preStop+drain {
			t.Errorf("terminationGracePeriodSeconds %v must exceed preStop %v + shutdown timeout %v", grace, preStop, drain)
		}
		// The endpoint is removed as soon as the pod starts terminating;
		// readiness turning 503 is the second line, and must at least take
		// effect within the drain.
		rp := c.ReadinessProbe
		if rp != nil && time.Duration(rp.PeriodSeconds*rp.FailureThreshold)*time.Second >= drain {
			t.Errorf("readiness takes %ds to fail, longer than the drain %v", rp.PeriodSeconds*rp.FailureThreshold, drain)
		}
	})

	t.Run("rollout", func(t *testing.T) {
		ru := d.Spec.Strategy.RollingUpdate
		if ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
			t.Errorf("a rollout must not take capacity away: maxUnavailable %v", ru)
		}
	})
}

func TestService(t *testing.T) {
	s := load(t)
	c := s.container(t)
	if len(s.svc.Spec.Selector) == 0 || !labels.SelectorFromSet(s.svc.Spec.Selector).Matches(labels.Set(s.deploy.Spec.Template.Labels)) {
		t.Errorf("the Service's selector %v does not select the Deployment's pods %v", s.svc.Spec.Selector, s.deploy.Spec.Template.Labels)
	}
	if len(s.svc.Spec.Ports) != 1 {
		t.Fatalf("ports %+v", s.svc.Spec.Ports)
	}
	p := s.svc.Spec.Ports[0]
	if p.Port != apiPort || containerPort(t, c, p.TargetPort) != apiPort {
		t.Errorf("service port %d → %v, want %d → %d", p.Port, p.TargetPort.String(), apiPort, apiPort)
	}
}

func TestPodDisruptionBudget(t *testing.T) {
	s := load(t)
	pdb := s.pdb
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.Type != intstr.Int || pdb.Spec.MinAvailable.IntVal != 2 {
		t.Errorf("minAvailable %v, want 2", pdb.Spec.MinAvailable)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(s.deploy.Spec.Template.Labels)) {
		t.Errorf("the PDB's selector %v does not select the Deployment's pods %v (%v)", pdb.Spec.Selector, s.deploy.Spec.Template.Labels, err)
	}
	// With as many replicas as minAvailable, no node could ever be drained.
	if *s.deploy.Spec.Replicas <= pdb.Spec.MinAvailable.IntVal {
		t.Errorf("replicas %d ≤ minAvailable %d: the budget blocks every eviction", *s.deploy.Spec.Replicas, pdb.Spec.MinAvailable.IntVal)
	}
}

func TestHorizontalPodAutoscaler(t *testing.T) {
	s := load(t)
	h := s.hpa.Spec
	ref := h.ScaleTargetRef
	if ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.Name != s.deploy.Name {
		t.Errorf("scaleTargetRef %+v, want apps/v1 Deployment %s", ref, s.deploy.Name)
	}
	if h.MinReplicas == nil {
		t.Fatal("minReplicas is not set (it would default to 1)")
	}
	if *h.MinReplicas < *s.deploy.Spec.Replicas || *h.MinReplicas <= s.pdb.Spec.MinAvailable.IntVal {
		t.Errorf("minReplicas %d: want at least the Deployment's %d and above the PDB's minAvailable %d", *h.MinReplicas, *s.deploy.Spec.Replicas, s.pdb.Spec.MinAvailable.IntVal)
	}
	if h.MaxReplicas <= *h.MinReplicas {
		t.Errorf("maxReplicas %d leaves no room to scale", h.MaxReplicas)
	}
	found := false
	for _, m := range h.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU {
			u := m.Resource.Target.AverageUtilization
			if m.Resource.Target.Type != autoscalingv2.UtilizationMetricType || u == nil || *u <= 0 || *u > 100 {
				t.Errorf("CPU target %+v", m.Resource.Target)
			}
			found = true
		}
	}
	if !found {
		t.Error("no CPU utilization metric")
	}
	// Utilization is relative to the request: without one the HPA cannot work.
	c := s.container(t)
	if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
		t.Error("the HPA scales on CPU utilization, which needs a CPU request")
	}
}

// TestConfigMap checks the ConfigMap holds config.example.yaml byte for
// byte and that the Deployment's checksum annotation matches it; with
// -update it rewrites both.
func TestConfigMap(t *testing.T) {
	example, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		writeConfigMap(t, example)
	}
	s := load(t)
	got, ok := s.cm.Data[configKey]
	if !ok {
		t.Fatalf("the ConfigMap has no %s", configKey)
	}
	if got != string(example) {
		t.Fatalf("the ConfigMap's %s differs from %s; run: go test -run TestConfigMap -update", configKey, exampleConfig)
	}
	var parsed struct {
		Dependencies map[string]map[string]any `json:"dependencies"`
	}
	if err := yaml.UnmarshalStrict([]byte(got), &parsed); err != nil {
		t.Fatalf("%s does not parse: %v", configKey, err)
	}
	// That config.example.yaml holds exactly the registry's defaults, for
	// every registered downstream and the cache, is internal/config's
	// TestExampleFile; byte equality carries it over here.
	if _, ok := parsed.Dependencies["cache"]; !ok || len(parsed.Dependencies) < 2 {
		t.Errorf("settings for %d dependencies, without the cache's: not config.example.yaml", len(parsed.Dependencies))
	}
	sum := sha256.Sum256([]byte(got))
	if want, have := hex.EncodeToString(sum[:]), s.deploy.Spec.Template.Annotations[checksumKey]; have != want {
		t.Fatalf("the Deployment's %s is %q, want %q (the pods would not roll on a config change); run: go test -run TestConfigMap -update", checksumKey, have, want)
	}
}

const configMapHeader = `# orderagg's per-dependency settings, mounted at /etc/orderagg/config.yaml
# and read with --config. Generated from config.example.yaml by
#   go test -run TestConfigMap -update
# which also updates the Deployment's config checksum, so that applying a
# change rolls the pods (the service reads the file at start and on SIGHUP).
`

func writeConfigMap(t *testing.T, example []byte) {
	t.Helper()
	var b strings.Builder
	b.WriteString(configMapHeader)
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: orderagg-config\n  labels:\n    app.kubernetes.io/name: orderagg\n    app.kubernetes.io/component: api\ndata:\n  " + configKey + ": |\n")
	for _, line := range strings.SplitAfter(string(example), "\n") {
		if line == "" {
			continue
		}
		if line != "\n" {
			b.WriteString("    ")
		}
		b.WriteString(line)
	}
	if err := os.WriteFile("configmap.yaml", []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(example)
	dep, err := os.ReadFile("deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(` + regexp.QuoteMeta(checksumKey) + `: )[0-9a-f]*`)
	if !re.Match(dep) {
		t.Fatalf("deployment.yaml has no %s annotation to update", checksumKey)
	}
	dep = re.ReplaceAll(dep, []byte("${1}"+hex.EncodeToString(sum[:])))
	if err := os.WriteFile("deployment.yaml", dep, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestKustomization renders the kustomization with kustomize's library: it
// must list exactly the manifests of this directory, render them unchanged
// but for the image, and let an overlay replace the image.
func TestKustomization(t *testing.T) {
	s := load(t)
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k kusttypes.Kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	res := slices.Clone(k.Resources)
	slices.Sort(res)
	if !slices.Equal(res, s.files) {
		t.Errorf("kustomization resources %v, want every manifest here: %v", res, s.files)
	}

	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	render := func(t *testing.T, fs filesys.FileSystem, path string) map[string]runtime.Object {
		t.Helper()
		out, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, path)
		if err != nil {
			t.Fatalf("kustomize build %s: %v", path, err)
		}
		objs := map[string]runtime.Object{}
		for _, r := range out.Resources() {
			y, err := r.AsYAML()
			if err != nil {
				t.Fatal(err)
			}
			obj, err := decodeStrict(y)
			if err != nil {
				t.Fatalf("rendered %s: %v", r.CurId(), err)
			}
			objs[r.GetKind()] = obj
		}
		return objs
	}
	imageOf := func(objs map[string]runtime.Object) string {
		d, ok := objs["Deployment"].(*appsv1.Deployment)
		if !ok {
			t.Fatal("no Deployment rendered")
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}

	base := render(t, filesys.MakeFsOnDisk(), dir)
	if len(base) != len(s.files) {
		t.Errorf("rendered %d kinds, want %d", len(base), len(s.files))
	}
	if got := imageOf(base); got != "orderagg:local" {
		t.Errorf("rendered image %q, want orderagg:local", got)
	}

	// An overlay, as a user would write it, over a copy of this directory.
	fs := filesys.MakeFsInMemory()
	for _, f := range append(slices.Clone(s.files), "kustomization.yaml") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.WriteFile("/base/"+f, b); err != nil {
			t.Fatal(err)
		}
	}
	overlay := "resources: [../base]\nimages:\n  - name: orderagg\n    newName: registry.example.com/shop/orderagg\n    newTag: v1.2.3\n"
	if err := fs.WriteFile("/prod/kustomization.yaml", []byte(overlay)); err != nil {
		t.Fatal(err)
	}
	if got := imageOf(render(t, fs, "/prod")); got != "registry.example.com/shop/orderagg:v1.2.3" {
		t.Errorf("overlay image %q: the image is not overridable", got)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServiceRunsAsDeployed builds the real binary and starts it with the
// Deployment's arguments and environment (listening on a free loopback
// port, with the ConfigMap's file): it must start, answer the probes'
// paths, and on SIGTERM stop within the shutdown timeout.
func TestServiceRunsAsDeployed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the service")
	}
	s := load(t)
	c := s.container(t)
	bin := filepath.Join(t.TempDir(), "orderagg")
	build := exec.Command("go", "build", "-o", bin, "./cmd/orderagg")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	cfg := filepath.Join(t.TempDir(), configKey)
	if err := os.WriteFile(cfg, []byte(s.cm.Data[configKey]), 0o600); err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(c.Args)
	if i := slices.Index(args, "--config"); i >= 0 {
		args[i+1] = cfg
	}
	env := []string{"PATH=" + os.Getenv("PATH")}
	vars := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.Name == "ORDERAGG_ADDR":
			v = "127.0.0.1:0" // the one change: a free port
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			q := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(e.ValueFrom.ResourceFieldRef.Resource, "limits."))]
			v = strconv.FormatInt(q.Value(), 10)
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			v = "test-" + strings.ReplaceAll(e.ValueFrom.FieldRef.FieldPath, ".", "-")
		case e.ValueFrom != nil:
			t.Fatalf("%s: unsupported valueFrom", e.Name)
		}
		// $(VAR) refers to a variable defined earlier, as Kubernetes expands it.
		v = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(v, func(m string) string {
			if r, ok := vars[m[2:len(m)-1]]; ok {
				return r
			}
			return m
		})
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	logs := &lockedBuffer{}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			logs.WriteString(line + "\n")
			if !sent && strings.Contains(line, `"msg":"ready"`) {
				if m := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(line); m != nil {
					addr <- m[1]
					sent = true
				}
			}
		}
		exited <- cmd.Wait()
	}()
	var api string
	select {
	case api = <-addr:
	case err := <-exited:
		t.Fatalf("the service exited at start-up (%v):\n%s", err, logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("the service was not ready in 30s:\n%s", logs)
	}

	for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
		resp, err := http.Get(fmt.Sprintf("http://%s%s", api, p.HTTPGet.Path))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", p.HTTPGet.Path, resp.StatusCode)
		}
	}

	drain := durationEnv(t, c, "ORDERAGG_SHUTDOWN_TIMEOUT", defaultShutdownTimeout)
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs)
		}
		if took := time.Since(start); took > drain {
			t.Fatalf("stopping took %v, over the shutdown timeout %v", took, drain)
		}
	case <-time.After(drain + 5*time.Second):
		t.Fatalf("still running %v after SIGTERM:\n%s", drain+5*time.Second, logs)
	}
}
