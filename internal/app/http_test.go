package app

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
)

// logLines returns the service's JSON log records, and the lines that are
// not JSON.
func logLines(t *testing.T, logs string) (records []map[string]any, plain []string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err == nil {
			records = append(records, rec)
		} else {
			plain = append(plain, line)
		}
	}
	return records, plain
}

// Demo mode says so in its log, with the commands that inject and clear a
// fault; the log is JSON lines only.
func TestDemoModeLogLine(t *testing.T) {
	s, _ := startService(t, nil, nil)
	records, plain := logLines(t, s.logs.String())
	if len(plain) != 0 {
		t.Fatalf("log lines that are not JSON: %q", plain)
	}
	for _, r := range records {
		if r["msg"] == "embedded demo mode: simulated downstreams in-process" {
			if cmd, _ := r["inject_fault"].(string); !strings.HasPrefix(cmd, "curl -X PUT http://"+s.addrs.Sim+"/faults/logistics") {
				t.Errorf("inject_fault %q", cmd)
			}
			return
		}
	}
	t.Fatal("no demo-mode log line")
}

// The ready line says "1.5s", never 1500000000 beside it.
func TestReadyLineDurationsAreStrings(t *testing.T) {
	s, _ := startService(t, nil, nil)
	records, _ := logLines(t, s.logs.String())
	for _, r := range records {
		if r["msg"] != "ready" {
			continue
		}
		if r["deadline"] != "1.5s" {
			t.Errorf("deadline %#v, want \"1.5s\"", r["deadline"])
		}
		return
	}
	t.Fatal("no ready line")
}

// The dashboard's streams are bounded end to end by --max-event-streams,
// and open streams do not hold up the shutdown.
func TestEventStreamsBoundedByFlag(t *testing.T) {
	s, _ := startService(t, []string{"--max-event-streams", "2"}, nil)
	url := "http://" + s.addrs.API + "/dashboard/events"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream: status %d", resp.StatusCode)
		}
	}
	a := s.get("/dashboard/events")
	if a.status != http.StatusServiceUnavailable || errCode(a) != "TOO_MANY_STREAMS" || a.header.Get("Retry-After") == "" || a.header.Get("X-Request-Id") == "" {
		t.Fatalf("third stream: %d %v %v", a.status, a.body, a.header)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestHEADOnHealthAndReadiness(t *testing.T) {
	s, _ := startService(t, nil, nil)
	for _, p := range []string{"/healthz", "/readyz", "/v1/resilience", "/metrics", "/dashboard", "/v1/orders/o-1"} {
		if a := s.do(http.MethodHead, "http://"+s.addrs.API+p, "", nil); a.status != http.StatusOK || a.header.Get("X-Request-Id") == "" {
			t.Errorf("HEAD %s: %d %v", p, a.status, a.header)
		}
	}
}

// recordingHandler keeps every record's level, message and attributes.
type recordingHandler struct {
	mu   sync.Mutex
	recs []map[string]any
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"level": r.Level, "msg": r.Message}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	h.mu.Lock()
	h.recs = append(h.recs, m)
	h.mu.Unlock()
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) records() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.recs...)
}

// A server reports its own errors through that log, at WARN.
func TestStartHTTPLogsServerErrorsAtWarn(t *testing.T) {
	rec := &recordingHandler{}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.WriteHeader(http.StatusTeapot) // net/http complains through ErrorLog
	})
	p := &program{logger: slog.New(rec), failed: make(chan error, 1)}
	defer p.closers.closeAll(slog.New(slog.DiscardHandler), time.Second)
	_, addr, err := p.serve("api", "127.0.0.1:0", func(*handlers.HostGuard) http.Handler { return h })
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for _, r := range rec.records() {
		if r["level"] == slog.LevelWarn && strings.Contains(r["msg"].(string), "superfluous") {
			return
		}
	}
	t.Fatalf("no WARN for the superfluous WriteHeader: %v", rec.records())
}
