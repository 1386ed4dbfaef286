package downstream

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/orderagg/orderagg/internal/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// simServer is a real simulator behind a real listener, counting the
// connections it accepts.
type simServer struct {
	*sim.Server
	URL      string
	newConns atomic.Int64
}

func startSim(t *testing.T, opts ...sim.Option) *simServer {
	t.Helper()
	s := &simServer{Server: sim.New(opts...)}
	s.URL = startCounting(t, s.Server, &s.newConns)
	// Cleanups run last-in first-out: release held requests, then close the
	// listener (httptest waits for active requests).
	t.Cleanup(s.Close)
	return s
}

// startCounting serves h, counting accepted connections in newConns.
func startCounting(t *testing.T, h http.Handler, newConns *atomic.Int64) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			newConns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}

func startHandler(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

func newClients(t *testing.T, baseURL string, c Config) *Clients {
	t.Helper()
	cl, err := NewClients(c, SameEndpoint(baseURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func mustSetFault(t *testing.T, s *simServer, service string, f sim.Fault) {
	t.Helper()
	if err := s.SetFault(service, f); err != nil {
		t.Fatal(err)
	}
}

func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}
