package loadtest

import (
	"crypto/sha256"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/orderagg/orderagg/build/testenv"
)

func TestEmbeddedScenario(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		testenv.Missing(t, "no redis-server on PATH to compare with (make deps)")
	}
	r := runScenarioJSON(t, "--scenario", "embedded", "--duration", "150ms", "--warmup", "0s", "--concurrency", "4")
	if len(r.Rows) != 2 || len(r.Steps) != 2 || len(r.Findings) != 2 {
		t.Fatalf("report %+v", r)
	}
	for _, st := range r.Steps {
		if st.Summary.Requests == 0 || st.Summary.OK() != st.Summary.Requests {
			t.Errorf("%s: %d requests, %d OK", st.Name, st.Summary.Requests, st.Summary.OK())
		}
	}
	if !strings.Contains(r.Findings[0], "embedded ÷ redis-server") || !strings.Contains(r.Load, "every page a new order") {
		t.Errorf("findings %q, load %q", r.Findings, r.Load)
	}
}

func TestHangCostScenario(t *testing.T) {
	r := runScenarioJSON(t, "--scenario", "hang-cost", "--duration", "150ms", "--warmup", "0s", "--concurrency", "4", "--ids", "20")
	if len(r.Rows) != 2 || len(r.Steps) != 2 || len(r.Findings) != 2 {
		t.Fatalf("report %+v", r)
	}
	healthy, hanging := r.Steps[0].Summary, r.Steps[1].Summary
	if r.Steps[0].Name != "healthy" || healthy.Requests == 0 || healthy.Live("logistics") != healthy.Requests {
		t.Errorf("healthy step: %+v", r.Steps[0])
	}
	if r.Steps[1].Name != "hanging" || hanging.Requests == 0 || hanging.Live("logistics") != 0 || hanging.OK() != hanging.Requests {
		t.Errorf("hanging step: every page should be a 200 with logistics not live: %+v", r.Steps[1])
	}
	if !strings.Contains(r.Findings[0], "hanging ÷ healthy") {
		t.Errorf("findings %q", r.Findings)
	}
}

func TestPidCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// Well over one 10 ms clock tick of CPU, so there is something to see.
	buf := make([]byte, 1<<20)
	for range 64 {
		sum := sha256.Sum256(buf)
		buf[0] = sum[0]
	}
	if d, ok := pidCPU(os.Getpid()); !ok || d <= 0 {
		t.Fatalf("pidCPU(self) = %v, %v", d, ok)
	}
	if _, ok := pidCPU(0); ok {
		t.Fatal("pid 0 must report nothing")
	}
}

func TestRedisDB(t *testing.T) {
	e := &experiment{o: Options{RedisURL: "redis://127.0.0.1:6390"}, redisPID: 42}
	if got := redisDB(e, 2); got != "redis://127.0.0.1:6390/2" {
		t.Errorf("child's URL: %q", got)
	}
	e.redisPID = 0 // a --redis-url: used as given
	if got := redisDB(e, 2); got != "redis://127.0.0.1:6390" {
		t.Errorf("given URL: %q", got)
	}
}
