package handlers

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

var (
	loopback = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	anyAddr  = &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
)

// do sends a request through g to a handler that counts what reaches it.
func do(t *testing.T, g *HostGuard, method, host string, header map[string]string) (int, string, bool) {
	t.Helper()
	reached := false
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached = true }))
	req := httptest.NewRequest(method, "http://x/dashboard/faults/order", strings.NewReader(`{"hang":true}`))
	req.Host = host
	for k, v := range header {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	if w.Code >= 400 {
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%d answer is not the JSON error document: %q (%v)", w.Code, w.Body, err)
		}
	}
	return w.Code, body.Error.Code, reached
}

// The audit's reproduction: a PUT naming a rebinding domain as Host reaches
// a loopback listener, and must change nothing.
func TestLoopbackListenerRefusesOtherHosts(t *testing.T) {
	for _, addr := range []net.Addr{loopback, &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}} {
		refusesOtherHosts(t, NewHostGuard(addr, nil))
	}
}

func refusesOtherHosts(t *testing.T, g *HostGuard) {
	t.Helper()
	for _, host := range []string{"evil.example:8080", "evil.example", "127.0.0.1.evil.example:8080", "10.0.0.1:8080", ""} {
		for _, method := range []string{http.MethodPut, http.MethodGet} {
			code, errCode, reached := do(t, g, method, host, nil)
			if code != http.StatusMisdirectedRequest || errCode != "MISDIRECTED_REQUEST" || reached {
				t.Errorf("%s Host %q: %d %s, reached handler %v; want 421 and nothing done", method, host, code, errCode, reached)
			}
		}
	}
}

func TestLoopbackAndAllowedHostsPass(t *testing.T) {
	g := NewHostGuard(loopback, []string{"Orders.Example", "dash.example:9999"})
	for _, host := range []string{"localhost", "localhost:8080", "LOCALHOST:1", "127.0.0.1:8080", "127.0.0.1", "[::1]:8080", "[::1]",
		"orders.example:8080", "orders.example.", "dash.example"} {
		if code, _, reached := do(t, g, http.MethodPut, host, nil); code != http.StatusOK || !reached {
			t.Errorf("Host %q: %d, reached %v; want served", host, code, reached)
		}
	}
	if code, _, _ := do(t, NewHostGuard(loopback, []string{"*"}), http.MethodPut, "evil.example:8080", nil); code != http.StatusOK {
		t.Errorf("--allowed-hosts '*': %d, want any host served", code)
	}
}

func TestOtherListenersServeAnyHost(t *testing.T) {
	for _, addr := range []net.Addr{anyAddr, &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 80}} {
		if code, _, reached := do(t, NewHostGuard(addr, nil), http.MethodPut, "evil.example:8080", nil); code != http.StatusOK || !reached {
			t.Errorf("listener %v, Host evil.example: %d; want served", addr, code)
		}
	}
}

// State-changing requests from another site are refused on every listener;
// reads are not, and loopback or allowed origins pass.
func TestCrossSiteStateChangesAreRefused(t *testing.T) {
	for _, addr := range []net.Addr{loopback, anyAddr} {
		g := NewHostGuard(addr, []string{"dash.example"})
		for _, tc := range []struct {
			method string
			header map[string]string
			want   int
		}{
			{http.MethodPut, map[string]string{"Origin": "http://evil.example:8080"}, http.StatusForbidden},
			{http.MethodPatch, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
			{http.MethodPost, map[string]string{"Origin": "null"}, http.StatusForbidden},
			{http.MethodDelete, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
			{http.MethodPut, map[string]string{"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
			{http.MethodPut, map[string]string{"Origin": "http://localhost:3000"}, http.StatusOK},
			{http.MethodPut, map[string]string{"Origin": "http://[::1]:8080"}, http.StatusOK},
			{http.MethodPut, map[string]string{"Origin": "https://dash.example", "Sec-Fetch-Site": "cross-site"}, http.StatusOK},
			{http.MethodPut, map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusOK},
			{http.MethodPut, nil, http.StatusOK}, // curl, scripts
			{http.MethodGet, map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusOK},
		} {
			code, errCode, reached := do(t, g, tc.method, "127.0.0.1:8080", tc.header)
			if code != tc.want || reached != (tc.want == http.StatusOK) || (tc.want == http.StatusForbidden && errCode != "CROSS_ORIGIN") {
				t.Errorf("listener %v: %s %v: %d %s, reached %v; want %d", addr, tc.method, tc.header, code, errCode, reached, tc.want)
			}
		}
	}
}
