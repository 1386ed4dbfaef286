package handlers

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// HostGuard keeps a web page on another site from driving a process
// through its operator's browser (DNS rebinding, cross-site forms). It is
// built for one listener and is safe for concurrent use.
//
// On a loopback listener only loopback Host names (localhost, 127.0.0.1,
// [::1], any port) and the allowed ones are served; on any other, every
// Host. On every listener a request that may change state (any method but
// GET, HEAD and OPTIONS) is refused when its Origin names a host neither
// loopback nor allowed, or, without an Origin, when Sec-Fetch-Site says
// cross-site. The zero HostGuard serves every Host and refuses state
// changes from other sites.
type HostGuard struct {
	loopbackOnly bool
	allowed      map[string]bool // normalized host names without port; "*" allows any
}

// NewHostGuard returns the HostGuard of a listener bound to listen. allowed
// are extra host names served (case-insensitive, a port ignored; "*": any).
func NewHostGuard(listen net.Addr, allowed []string) *HostGuard {
	tcp, ok := listen.(*net.TCPAddr)
	g := &HostGuard{loopbackOnly: ok && tcp.IP.IsLoopback(), allowed: map[string]bool{}}
	for _, h := range allowed {
		if h = hostOnly(h); h != "" {
			g.allowed[h] = true
		}
	}
	return g
}

// Wrap serves next the requests the guard lets through and answers the
// others with the contract's JSON error: 421 MISDIRECTED_REQUEST for a Host
// not served, 403 CROSS_ORIGIN for a state change from another site.
func (g *HostGuard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case g.loopbackOnly && !g.trusted(hostOnly(r.Host)):
			WriteError(w, http.StatusMisdirectedRequest, "MISDIRECTED_REQUEST",
				"this server answers only to loopback host names and --allowed-hosts")
		case r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions && !g.sameSite(r):
			WriteError(w, http.StatusForbidden, "CROSS_ORIGIN",
				"a state-changing request from another site is refused; add its host to --allowed-hosts")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// sameSite reports whether a request comes from a loopback or allowed
// origin, or names no other site.
func (g *HostGuard) sameSite(r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		return err == nil && g.trusted(hostOnly(u.Host))
	}
	return r.Header.Get("Sec-Fetch-Site") != "cross-site"
}

// trusted reports whether host, normalized, is loopback or allowed.
func (g *HostGuard) trusted(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || g.allowed["*"] || g.allowed[host] || ip != nil && ip.IsLoopback()
}

// hostOnly is a host[:port]'s name without its port or brackets, in lower
// case and without a trailing dot.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		hostport = h
	}
	host := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(hostport), "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
