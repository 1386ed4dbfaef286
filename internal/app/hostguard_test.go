package app

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// hostDo sends a request naming host in its Host header, with header set.
func hostDo(t *testing.T, method, url, host, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("%s %s (Host %s): %d answered with %q, not JSON", method, url, host, resp.StatusCode, raw)
	}
	return resp.StatusCode, string(raw)
}

// The audit's reproduction, on every listener of a service on loopback: a
// request naming a rebinding domain as Host is refused and changes nothing,
// and so is a state-changing request from another origin.
func TestRebindingAndCrossOriginAreRefused(t *testing.T) {
	const token = "s3cret-admin-token"
	s, _ := startService(t, []string{"--admin-addr", "127.0.0.1:0", "--admin-token", token}, nil)
	api, admin, simBase := "http://"+s.addrs.API, "http://"+s.addrs.Admin, "http://"+s.addrs.Sim
	hang := `{"hang":true}`
	evilOrigin := map[string]string{"Origin": "http://evil.example:8080"}
	auth := map[string]string{"Authorization": "Bearer " + token}
	hung := func() bool {
		_, faults := hostDo(t, "GET", simBase+"/faults", "", "", nil)
		return strings.Contains(faults, `"hang":true`)
	}

	for _, tc := range []struct {
		name, method, url, host string
		header                  map[string]string
		want                    int
	}{
		{"dashboard fault, rebinding Host", "PUT", api + "/dashboard/faults/order", "evil.example:8080", nil, http.StatusMisdirectedRequest},
		{"dashboard fault, other origin", "PUT", api + "/dashboard/faults/order", "", evilOrigin, http.StatusForbidden},
		{"dashboard fault, cross-site fetch", "PUT", api + "/dashboard/faults/order", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"sim fault, rebinding Host", "PUT", simBase + "/faults/order", "evil.example:9100", nil, http.StatusMisdirectedRequest},
		{"sim fault, other origin", "PUT", simBase + "/faults/order", "", evilOrigin, http.StatusForbidden},
		{"page read, rebinding Host", "GET", api + "/v1/orders/o-1", "evil.example:8080", nil, http.StatusMisdirectedRequest},
		{"metrics read, rebinding Host", "GET", api + "/metrics", "evil.example:8080", nil, http.StatusMisdirectedRequest},
	} {
		if got, body := hostDo(t, tc.method, tc.url, tc.host, hang, tc.header); got != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, got, body, tc.want)
		}
		if hung() {
			t.Fatalf("%s: refused, yet the fault was set", tc.name)
		}
	}

	// The admin API: the Host, then the Origin, are checked as well as the
	// token, and a refused PATCH changes nothing.
	patch := `{"timeout":"250ms"}`
	if got, _ := hostDo(t, "PATCH", admin+"/admin/dependencies/coupon", "evil.example", patch, auth); got != http.StatusMisdirectedRequest {
		t.Errorf("admin PATCH with a rebinding Host: %d, want 421", got)
	}
	withOrigin := map[string]string{"Authorization": auth["Authorization"], "Origin": "https://evil.example"}
	if got, _ := hostDo(t, "PATCH", admin+"/admin/dependencies/coupon", "", patch, withOrigin); got != http.StatusForbidden {
		t.Errorf("admin PATCH from another origin: %d, want 403", got)
	}
	if got := depState(s, "coupon")["timeout_ms"]; got != 300.0 {
		t.Fatalf("a refused PATCH changed the timeout to %v", got)
	}

	// Loopback names, and loopback origins, are served.
	for _, host := range []string{"localhost:1234", "127.0.0.1", "[::1]:8080"} {
		if got, body := hostDo(t, "GET", api+"/healthz", host, "", nil); got != http.StatusOK {
			t.Errorf("Host %s: %d %s", host, got, body)
		}
	}
	same := map[string]string{"Origin": api, "Sec-Fetch-Site": "same-origin"}
	if got, body := hostDo(t, "PUT", api+"/dashboard/faults/order", "", hang, same); got != http.StatusOK || !hung() {
		t.Fatalf("the dashboard's own PUT: %d %s", got, body)
	}
	if got, _ := hostDo(t, "DELETE", api+"/dashboard/faults", "", "", same); got != http.StatusOK || hung() {
		t.Fatalf("the dashboard's own DELETE: %d", got)
	}
}

// --allowed-hosts names the hosts served besides loopback ones, as Host and
// as Origin.
func TestAllowedHostsAreServed(t *testing.T) {
	s, _ := startService(t, []string{"--allowed-hosts", "orders.example, dash.example"}, nil)
	api := "http://" + s.addrs.API
	if got, _ := hostDo(t, "GET", api+"/healthz", "orders.example:8080", "", nil); got != http.StatusOK {
		t.Errorf("allowed Host: %d", got)
	}
	if got, _ := hostDo(t, "GET", api+"/healthz", "evil.example", "", nil); got != http.StatusMisdirectedRequest {
		t.Errorf("other Host: %d", got)
	}
	origin := map[string]string{"Origin": "https://dash.example", "Sec-Fetch-Site": "cross-site"}
	if got, body := hostDo(t, "PUT", api+"/dashboard/faults/coupon", "", `{"error_rate":0}`, origin); got != http.StatusOK {
		t.Errorf("allowed Origin: %d %s", got, body)
	}
}

// A service listening on every interface, as in the container image,
// serves any Host: an ingress decides there. Other origins still cannot
// change anything.
func TestNonLoopbackListenerServesAnyHost(t *testing.T) {
	s, _ := startService(t, []string{"--addr", "0.0.0.0:0"}, nil)
	_, port, err := net.SplitHostPort(s.addrs.API)
	if err != nil {
		t.Fatal(err)
	}
	api := "http://127.0.0.1:" + port
	if got, body := hostDo(t, "GET", api+"/v1/orders/o-1", "orders.example.com", "", nil); got != http.StatusOK {
		t.Errorf("any Host: %d %s", got, body)
	}
	if got, _ := hostDo(t, "PUT", api+"/dashboard/faults/order", "orders.example.com", `{"hang":true}`,
		map[string]string{"Origin": "http://evil.example"}); got != http.StatusForbidden {
		t.Errorf("other origin: %d, want 403", got)
	}
}
