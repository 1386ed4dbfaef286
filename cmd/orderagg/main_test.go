package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestExitStatus(t *testing.T) {
	tests := []struct {
		args   []string
		env    map[string]string
		status int
		out    string // expected in stdout (status 0) or stderr
	}{
		{[]string{"serve", "--deadline", "abc"}, nil, 2, "--deadline"},
		{[]string{"--order-url", "localhost:9100"}, nil, 2, "--order-url"},
		{[]string{"serve", "--max-inflight", "-1"}, nil, 2, "--max-inflight"},
		{nil, map[string]string{"ORDERAGG_DEADLINE": "soon"}, 2, "ORDERAGG_DEADLINE"},
		{[]string{"serve", "--admin-addr", "127.0.0.1:0"}, nil, 2, "--admin-token"},
		{[]string{"sim", "--addr"}, nil, 2, "addr"},
		{[]string{"frobnicate"}, nil, 2, "unknown command"},
		{[]string{"serve", "--help"}, nil, 0, "ORDERAGG_REDIS_URL"},
		{[]string{"sim", "-h"}, nil, 0, "--addr"},
		{[]string{"help"}, nil, 0, "healthcheck"},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		got := run(tc.args, &stdout, &stderr, func(k string) string { return tc.env[k] })
		if got != tc.status {
			t.Errorf("%v: status %d, want %d (stderr %q)", tc.args, got, tc.status, stderr.String())
			continue
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
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHealthcheck(t *testing.T) {
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer ready.Close()
	var out, errOut bytes.Buffer
	if got := run([]string{"healthcheck", "--url", ready.URL + "/readyz"}, &out, &errOut, func(string) string { return "" }); got != 0 {
		t.Fatalf("healthy: %d %s", got, errOut.String())
	}
	if got := run([]string{"healthcheck", "--url", ready.URL + "/other"}, &out, &errOut, func(string) string { return "" }); got != 1 {
		t.Fatalf("503: %d", got)
	}
	addr := strings.TrimPrefix(ready.URL, "http://")
	_, port, _ := net.SplitHostPort(addr)
	env := map[string]string{"ORDERAGG_ADDR": ":" + port}
	if got := run([]string{"healthcheck"}, &out, &errOut, func(k string) string { return env[k] }); got != 0 {
		t.Fatalf("default URL from ORDERAGG_ADDR: %d %s", got, errOut.String())
	}
}
