package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// TestReviewsRegistered proves docs/adding-a-dependency.md: it copies the
// repository, applies examples/reviews/register.patch (the guide's changes
// to the files it lists), regenerates the README table and the Kubernetes
// ConfigMap as the guide says, and then
//
//   - in_process: runs the unit and in-process end-to-end suites of every
//     package the patch touches, plus internal/app (the whole service in
//     process) and examples/reviews, whose TestServeWithReviewsRegistered
//     only runs when reviews is registered;
//   - full_stack: builds the patched service image and runs it, a patched
//     simulator and Redis on a private network, configured as compose is
//     (--downstreams-url only): the page gains a live reviews section; a
//     failing reviews service degrades that section alone, to its last-good
//     copy or to its semantic default.
func TestReviewsRegistered(t *testing.T) {
	for _, tool := range []string{"go", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, "%s is not on PATH", tool)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(t.TempDir(), "orderagg")
	copyRepo(t, root, tree)
	patch := filepath.Join(root, "examples", "reviews", "register.patch")
	if out, err := command(tree, "git", "apply", "-C1", patch).CombinedOutput(); err != nil {
		t.Fatalf("register.patch does not apply to this tree (refresh it: docs/adding-a-dependency.md, \"When the tree moves\"): %v\n%s", err, out)
	}
	// The files the guide regenerates rather than edits.
	goTest(t, tree, "-run", "^(TestREADMEConfigTables|TestExampleFileEqualsDefaults)$", "./internal/config/", "-update")
	goTest(t, filepath.Join(tree, "deploy", "kubernetes"), "-run", "^TestConfigMap$", ".", "-update")

	t.Run("in_process", func(t *testing.T) {
		// The example's end-to-end test must run, not skip.
		out := goTest(t, tree, "-v", "-run", "^(TestServeWithReviewsRegistered|TestRegisteredEntryIsTheExample)$", "./examples/reviews/")
		for _, name := range []string{"TestServeWithReviewsRegistered", "TestRegisteredEntryIsTheExample"} {
			if !strings.Contains(out, "--- PASS: "+name) {
				t.Errorf("%s did not pass with reviews registered:\n%s", name, out)
			}
		}
		goTest(t, tree, "./internal/orderdetail/", "./internal/downstream/", "./internal/sim/",
			"./internal/config/", "./internal/handlers/", "./internal/dashboard/", "./internal/app/", "./examples/...", "./cmd/...", "./docs/")
		goTest(t, filepath.Join(tree, "deploy", "kubernetes"), "./...")
	})

	t.Run("full_stack", func(t *testing.T) {
		requireImages(t, images().Redis)
		if _, err := exec.LookPath("docker"); err != nil {
			unavailable(t, "the docker CLI is not on PATH (it builds the patched image)")
		}
		img := buildPatchedImage(t, tree)
		nw := newNetwork(t)
		startRedis(t, nw)
		simC := run(t, img, simAlias, nw,
			testcontainers.WithCmd("sim", "--addr", ":9100"),
			testcontainers.WithExposedPorts(simPort),
			testcontainers.WithConfigModifier(func(cfg *container.Config) {
				cfg.Healthcheck = &container.HealthConfig{Test: []string{"NONE"}}
			}),
			testcontainers.WithWaitStrategy(wait.ForHTTP("/faults").WithPort(simPort).WithStartupTimeout(startupTimeout)),
		)
		simURL := "http://" + endpoint(t, simC, simPort)
		svc := run(t, img, serviceAlias, nw,
			testcontainers.WithCmd("serve"),
			testcontainers.WithEnv(map[string]string{
				"ORDERAGG_ADDR": ":8080",
				// As compose sets it: no --reviews-url anywhere.
				"ORDERAGG_DOWNSTREAMS_URL": "http://" + simAlias + ":9100",
				"ORDERAGG_REDIS_URL":       "redis://" + redisAlias + ":6379/0",
			}),
			testcontainers.WithExposedPorts(servicePort),
			testcontainers.WithWaitStrategy(wait.ForHTTP("/readyz").WithPort(servicePort).WithStartupTimeout(startupTimeout)),
		)
		base := "http://" + endpoint(t, svc, servicePort)

		// Live, and equal to what the simulator says.
		_, simBody := get(t, simURL+"/reviews/v1/orders/o-rv1/reviews")
		var want struct {
			Reviews []json.RawMessage `json:"reviews"`
		}
		if err := json.Unmarshal(simBody, &want); err != nil {
			t.Fatalf("simulator's reviews: %v: %s", err, trimBody(simBody))
		}
		page := reviewsPage(t, base, "o-rv1")
		live := page.section(t, "reviews")
		if live.Source != "live" || page.Degraded || len(live.Items) != len(want.Reviews) {
			t.Fatalf("live reviews %s (simulator: %d reviews)", page.raw["reviews"], len(want.Reviews))
		}
		for i := range want.Reviews {
			if !bytes.Equal(compactJSON(t, live.Items[i]), compactJSON(t, want.Reviews[i])) {
				t.Errorf("review %d: page %s, simulator %s", i, live.Items[i], want.Reviews[i])
			}
		}
		_, resBody := get(t, base+"/v1/resilience")
		if !strings.Contains(string(resBody), `"name":"reviews"`) {
			t.Errorf("/v1/resilience lacks reviews: %s", trimBody(resBody))
		}

		// The reviews service fails: the page seen before is served its
		// last-good copy (written after the answer: wait for it), a new one
		// the semantic default; the other sections stay live.
		setFault(t, simURL, "reviews", `{"error_rate":1}`)
		var cached reviewsSection
		for deadline := time.Now().Add(30 * time.Second); ; {
			page = reviewsPage(t, base, "o-rv1")
			if cached = page.section(t, "reviews"); cached.Source == "cache" || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond) // the write-behind has not landed yet
		}
		if cached.Source != "cache" || cached.Reason != "FAILURE" || cached.AsOf == "" || len(cached.Items) != len(live.Items) {
			t.Fatalf("reviews failing, seen before: %s", page.raw["reviews"])
		}
		fresh := reviewsPage(t, base, "o-rv2")
		if got, want := string(compactJSON(t, fresh.raw["reviews"])), `{"source":"fallback","degraded":true,"reason":"FAILURE","items":[],"average":null}`; got != want {
			t.Errorf("reviews failing, never seen:\n got %s\nwant %s", got, want)
		}
		for _, name := range []string{"order", "inventory", "coupons", "logistics"} {
			if s := fresh.section(t, name); s.Source != "live" {
				t.Errorf("%s is %s while only reviews fails", name, s.Source)
			}
		}
		t.Logf("reviews live (%d items), from cache as of %s, fallback for a new order", len(live.Items), cached.AsOf)
	})
}

type reviewsSection struct {
	Source string            `json:"source"`
	Reason string            `json:"reason"`
	AsOf   string            `json:"as_of"`
	Items  []json.RawMessage `json:"items"`
}

type pageWithReviews struct {
	Degraded bool
	raw      map[string]json.RawMessage
}

func (p pageWithReviews) section(t *testing.T, name string) reviewsSection {
	t.Helper()
	var s reviewsSection
	if err := json.Unmarshal(p.raw[name], &s); err != nil {
		t.Fatalf("section %s: %v: %s", name, err, p.raw[name])
	}
	return s
}

func reviewsPage(t *testing.T, base, id string) pageWithReviews {
	t.Helper()
	resp, body := get(t, base+"/v1/orders/"+id)
	var p pageWithReviews
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &p.raw) != nil || json.Unmarshal(p.raw["degraded"], &p.Degraded) != nil {
		t.Fatalf("GET %s: %d %s", id, resp.StatusCode, trimBody(body))
	}
	return p
}

// copyRepo copies the repository at root to dst, leaving out VCS metadata
// and build output.
func copyRepo(t *testing.T, root, dst string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		slash := filepath.ToSlash(rel)
		if d.Name() == ".git" || slash == "build/out" || slash == "orderagg" || strings.HasSuffix(d.Name(), ".test") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copy %s: %v", root, err)
	}
}

func command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	return cmd
}

// goTest runs go test -count=1 on pkgs in dir and returns its output,
// failing the test when it fails.
func goTest(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := command(dir, "go", append([]string{"test", "-count=1", "-timeout", "10m"}, args...)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test %s in the patched tree: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("go test %s: passed in %s", strings.Join(args, " "), time.Since(start).Round(time.Second))
	return string(out)
}

// buildPatchedImage builds the patched tree's static binary and its image
// (the repository's Dockerfile, FROM scratch: nothing is pulled) under a
// name of its own, removed when the test ends.
func buildPatchedImage(t *testing.T, tree string) string {
	t.Helper()
	out := filepath.Join(tree, "build", "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	build := command(tree, "go", "build", "-trimpath", "-ldflags", "-s -w", "-tags", "timetzdata", "-o", filepath.Join(out, "orderagg"), "./cmd/orderagg")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the patched service: %v\n%s", err, b)
	}
	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		ca = nil // the stack here speaks plain HTTP; the file must only exist
	}
	if err := os.WriteFile(filepath.Join(out, "ca-certificates.crt"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	img := fmt.Sprintf("orderagg-reviews:test-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if b, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", img, tree).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, b)
	}
	t.Cleanup(func() {
		if b, err := exec.Command("docker", "image", "rm", "-f", img).CombinedOutput(); err != nil {
			t.Logf("docker image rm %s: %v\n%s", img, err, b)
		}
	})
	return img
}
