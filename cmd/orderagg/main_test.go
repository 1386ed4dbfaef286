package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/orderagg/orderagg/internal/config"
)

func TestExitStatus(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	blindTimeout := writeFile(t, "dependencies:\n  coupon:\n    timeout: 1450ms\n")
	blindCeiling := writeFile(t, "dependencies:\n  logistics:\n    timeout: auto\n    timeout_max: 1400ms\n")
	unknownKey := writeFile(t, "dependencies:\n  coupon:\n    breaker:\n      windw: 5s\n")
	tests := []struct {
		args   []string
		env    map[string]string
		status int
		out    string // expected in stdout (status 0) or stderr
	}{
		{[]string{"serve", "--deadline", "abc"}, nil, 2, "--deadline (ORDERAGG_DEADLINE): invalid value \"abc\""},
		{[]string{"serve", "--deadline", "-1s"}, nil, 2, "--deadline (ORDERAGG_DEADLINE): must be positive"},
		{[]string{"serve", "--max-event-streams", "0"}, nil, 2, "--max-event-streams"},
		{[]string{"serve", "--trusted-proxies", "10.0.0.0/8,proxy.local"}, nil, 2, "--trusted-proxies"},
		{[]string{"serve", "--allowed-hosts", "http://evil.example"}, nil, 2, "--allowed-hosts"},
		{[]string{"sim", "--allowed-hosts", "a.example,*/x"}, nil, 2, "--allowed-hosts"},
		{[]string{"serve", "--reserve", "40ms"}, nil, 2, "--reserve (ORDERAGG_RESERVE): 40ms must be longer than dependencies.cache.timeout 50ms"},
		{[]string{"serve", "--deadline", "1s"}, nil, 2, "dependencies.order.timeout: 1s must be shorter than --deadline 1s minus --reserve 100ms = 900ms"},
		{[]string{"serve", "--config", blindTimeout}, nil, 2, "dependencies.coupon.timeout (line 3): 1.45s must be shorter than --deadline 1.5s minus --reserve 100ms = 1.4s"},
		{[]string{"serve", "--config", blindCeiling}, nil, 2, "dependencies.logistics.timeout_max (line 4): 1.4s must be shorter than --deadline 1.5s minus --reserve 100ms = 1.4s"},
		{[]string{"serve", "--config", unknownKey}, nil, 2, `line 4: unknown key "windw"`},
		{[]string{"--order-url", "localhost:9100"}, nil, 2, "--order-url"},
		{[]string{"serve", "--max-inflight", "-1"}, nil, 2, "--max-inflight"},
		{nil, map[string]string{"ORDERAGG_DEADLINE": "soon"}, 2, "ORDERAGG_DEADLINE"},
		{[]string{"serve", "--admin-addr", "127.0.0.1:0"}, nil, 2, "--admin-token"},
		{[]string{"serve", "--admin-addr", "127.0.0.1:0", "--admin-token", "tooshort"}, nil, 2, "--admin-token (ORDERAGG_ADMIN_TOKEN): the token must be at least 16 bytes"},
		{[]string{"serve", "--admin-addr", "127.0.0.1:0", "--admin-token-file", tokenFile}, nil, 2, "--admin-token-file (ORDERAGG_ADMIN_TOKEN_FILE): the token must be at least 16 bytes, got 5"},
		{[]string{"serve", "--admin-token", "0123456789abcdef", "--admin-token-file", tokenFile}, nil, 2, "exclusive"},
		{[]string{"serve", "--order-url", "http://sim:9100"}, nil, 2, "--downstreams-url"},
		{[]string{"sim", "--addr"}, nil, 2, "addr"},
		{[]string{"healthcheck", "--timeout", "0s"}, nil, 2, "--timeout (ORDERAGG_HEALTHCHECK_TIMEOUT)"},
		{[]string{"frobnicate"}, nil, 2, "unknown command"},
		{[]string{"serve", "--help"}, nil, 0, "ORDERAGG_REDIS_URL"},
		{[]string{"sim", "-h"}, nil, 0, "--addr"},
		{[]string{"healthcheck", "--help"}, nil, 0, "ORDERAGG_HEALTHCHECK_URL"},
		{[]string{"help"}, nil, 0, "healthcheck"},
		{[]string{"--version"}, nil, 0, "orderagg dev"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			got := run(tc.args, &stdout, &stderr)
			if got != tc.status {
				t.Fatalf("%v: status %d, want %d (stderr %q)", tc.args, got, tc.status, stderr.String())
			}
			where := stderr.String()
			if tc.status == 0 {
				where = stdout.String()
			}
			if !strings.Contains(where, tc.out) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, tc.out, where)
			}
			if tc.status == 2 && strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 && tc.args[0] != "frobnicate" {
				t.Errorf("%v: the error should be one line: %q", tc.args, stderr.String())
			}
		})
	}
}

// TestHelpNamesEveryCommand: the top-level help, however asked for, names
// every sub-command; serve's lists every flag with its default and variable.
func TestHelpNamesEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		var stdout, stderr bytes.Buffer
		if got := run(args, &stdout, &stderr); got != 0 {
			t.Fatalf("%v: status %d", args, got)
		}
		for _, cmd := range []string{"serve", "sim", "healthcheck", "version"} {
			if !strings.Contains(stdout.String(), "\n  "+cmd+" ") {
				t.Errorf("%v does not name %s:\n%s", args, cmd, stdout.String())
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if got := run([]string{"serve", "--help"}, &stdout, &stderr); got != 0 {
		t.Fatalf("serve --help: status %d", got)
	}
	def := config.DefaultServe()
	config.ServeFlags(&def).VisitAll(func(f *flag.Flag) {
		want := fmt.Sprintf("--%s %s  (%s, default ", f.Name, must(flag.UnquoteUsage(f)), config.EnvName(config.EnvPrefix, f.Name))
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("serve --help lacks %q", want)
		}
	})
	for _, want := range []string{"--deadline duration  (ORDERAGG_DEADLINE, default 1.5s)", "--order-url URL  (ORDERAGG_ORDER_URL, default empty)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
}

// TestNoSecretInStartupErrors is the audit's finding S1 end to end: a bad
// URL holding a password, given by flag or variable, stops the start-up with
// one line naming the flag, never the password.
func TestNoSecretInStartupErrors(t *testing.T) {
	const pw = "Sup3rPW"
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		named string
	}{
		{"redis port", []string{"serve", "--redis-url", "redis://u:" + pw + "@127.0.0.1:notaport/0"}, nil, "--redis-url"},
		{"redis escape", []string{"serve", "--redis-url", "redis://u:" + pw + "%zz@cache:6379/0"}, nil, "--redis-url"},
		{"redis from env", nil, map[string]string{"ORDERAGG_REDIS_URL": "redis://u:" + pw + "@127.0.0.1:notaport/0"}, "ORDERAGG_REDIS_URL"},
		{"redis query password", []string{"serve", "--redis-url", "redis://s1:26379?master_name=m&password=" + pw + "#x"}, nil, "--redis-url"},
		{"order URL", []string{"serve", "--order-url", "http://u:" + pw + "@order:notaport"}, nil, "--order-url"},
		{"order URL slash in password", []string{"serve", "--order-url", "http://u:" + pw + "/x@order"}, nil, "--order-url"},
		{"downstreams URL", []string{"serve", "--downstreams-url", "ftp://u:" + pw + "@sim:9100"}, nil, "--downstreams-url"},
		{"downstreams URL from env", nil, map[string]string{"ORDERAGG_DOWNSTREAMS_URL": "http://u:" + pw + "%zz@sim:9100"}, "ORDERAGG_DOWNSTREAMS_URL"},
		{"bad flag syntax", []string{"serve", "---redis-url=redis://u:" + pw + "@cache"}, nil, "bad flag syntax"},
		{"stray argument", []string{"serve", "redis://u:" + pw + "@cache"}, nil, "unexpected argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			if got := run(tc.args, &stdout, &stderr); got != 2 {
				t.Fatalf("status %d, want 2 (stderr %q)", got, stderr.String())
			}
			if out := stderr.String(); strings.Contains(out, pw) || !strings.Contains(out, tc.named) {
				t.Errorf("stderr %q: want %s named and no password", out, tc.named)
			}
		})
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "orderagg.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func must(s, _ string) string { return s }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHealthcheck(t *testing.T) {
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer ready.Close()
	var out, errOut bytes.Buffer
	if got := run([]string{"healthcheck", "--url", ready.URL + "/readyz"}, &out, &errOut); got != 0 {
		t.Fatalf("healthy: %d %s", got, errOut.String())
	}
	if got := run([]string{"healthcheck", "--url", ready.URL + "/other"}, &out, &errOut); got != 1 {
		t.Fatalf("503: %d", got)
	}
	addr := strings.TrimPrefix(ready.URL, "http://")
	_, port, _ := net.SplitHostPort(addr)
	t.Setenv("ORDERAGG_ADDR", ":"+port)
	if got := run([]string{"healthcheck"}, &out, &errOut); got != 0 {
		t.Fatalf("default URL from ORDERAGG_ADDR: %d %s", got, errOut.String())
	}
	t.Setenv("ORDERAGG_HEALTHCHECK_URL", ready.URL+"/other")
	if got := run([]string{"healthcheck"}, &out, &errOut); got != 1 {
		t.Fatalf("ORDERAGG_HEALTHCHECK_URL not used: %d", got)
	}
}
