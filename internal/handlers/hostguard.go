package handlers

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// HostGuard keeps a web page on another site from driving a process
// through its operator's browser (DNS rebinding, cross-site forms). It
// serves one listener and is safe for concurrent use. The zero HostGuard
// serves every Host and refuses state changes from other sites.
type HostGuard struct {
	loopbackOnly bool
	allowed      []string
}

// NewHostGuard returns the HostGuard of a listener bound to listen. allowed
// are extra host names served (case-insensitive, a port ignored; "*": any).
func NewHostGuard(listen net.Addr, allowed []string) *HostGuard {
	tcp, ok := listen.(*net.TCPAddr)
	return &HostGuard{loopbackOnly: ok && tcp.IP.IsLoopback(), allowed: allowed}
}

// Wrap serves next what the guard lets through. On a loopback listener a
// Host neither loopback (localhost, 127.0.0.1, [::1], any port) nor allowed
// gets 421 MISDIRECTED_REQUEST. On any listener a request other than GET,
// HEAD and OPTIONS whose Origin names a host neither loopback nor allowed,
// or that has no Origin and says Sec-Fetch-Site: cross-site, gets 403
// CROSS_ORIGIN.
func (g *HostGuard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case g.loopbackOnly && !g.trusted(r.Host):
			WriteError(w, http.StatusMisdirectedRequest, "MISDIRECTED_REQUEST",
				"this server answers only to loopback host names and --allowed-hosts")
		case g.crossSite(r):
			WriteError(w, http.StatusForbidden, "CROSS_ORIGIN",
				"a state-changing request from another site is refused; add its host to --allowed-hosts")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func (g *HostGuard) crossSite(r *http.Request) bool {
	if slices.Contains([]string{http.MethodGet, http.MethodHead, http.MethodOptions}, r.Method) {
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		return err != nil || !g.trusted(u.Host)
	}
	return r.Header.Get("Sec-Fetch-Site") == "cross-site"
}

// trusted reports whether a host[:port] names a loopback or allowed host.
func (g *HostGuard) trusted(hostport string) bool {
	host := hostOnly(hostport)
	return host == "localhost" || net.ParseIP(host).IsLoopback() ||
		slices.ContainsFunc(g.allowed, func(a string) bool { a = hostOnly(a); return a == "*" || a != "" && a == host })
}

// hostOnly is a host[:port]'s name without its port or brackets, in lower
// case and without a trailing dot.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		hostport = h
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(hostport, "[] ")), ".")
}
