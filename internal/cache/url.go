package cache

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// urlDefaults are the go-redis options a --redis-url query may set, at the
// values used when it does not: a read on the request path is bounded by its
// ctx, so these are backstops, and a down Redis must fail at once rather
// than spend the page's budget on retries.
var urlDefaults = [][2]string{
	{"pool_size", "64"}, {"dial_timeout", "200ms"}, {"read_timeout", "100ms"}, {"write_timeout", "100ms"}, {"max_retries", "-1"},
}

// newClient builds the client of a --redis-url (one node, Cluster or
// Sentinel, as the package documentation says) and names its topology.
// go-redis connects lazily. Errors name the flag and never hold a password.
func newClient(rawURL string) (redis.UniversalClient, string, error) {
	c, topology, err := parseClient(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, "", fmt.Errorf("cache: invalid --redis-url %s: %w", RedactURL(rawURL), err)
	}
	return c, topology, nil
}

func parseClient(rawURL string) (redis.UniversalClient, string, error) {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return nil, "", err
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return nil, "", fmt.Errorf("scheme must be redis:// or rediss://, not %q", u.Scheme)
	case u.Host == "":
		return nil, "", errors.New("no host")
	}
	q := u.Query()
	for _, d := range urlDefaults {
		if !q.Has(d[0]) {
			q.Set(d[0], d[1])
		}
	}
	cluster := false
	if q.Has("cluster") { // ours, not go-redis's
		if cluster, err = strconv.ParseBool(q.Get("cluster")); err != nil {
			return nil, "", fmt.Errorf("cluster=%q is not a boolean", q.Get("cluster"))
		}
		q.Del("cluster")
	}
	if q.Has("master_name") || cluster || q.Has("addr") {
		if !q.Has("dialer_retries") {
			q.Set("dialer_retries", "1")
		}
	}
	u.RawQuery = q.Encode()
	switch {
	case q.Has("master_name"):
		o, err := redis.ParseFailoverURL(u.String())
		if err != nil {
			return nil, "", err
		}
		if o.RouteByLatency || o.RouteRandomly {
			return nil, "", errors.New("route_by_latency and route_randomly are not supported with Sentinel")
		}
		o.ContextTimeoutEnabled = true
		return redis.NewFailoverClient(o), "sentinel", nil
	case cluster || q.Has("addr"):
		if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
			return nil, "", fmt.Errorf("a cluster has no database %q", p)
		}
		u.Path = ""
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, "", err
		}
		if o.TLSConfig != nil {
			o.TLSConfig.MinVersion = max(o.TLSConfig.MinVersion, tls.VersionTLS12)
		}
		o.ContextTimeoutEnabled = true
		return redis.NewClusterClient(o), "cluster", nil
	default:
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, "", err
		}
		o.DialerRetries, o.ContextTimeoutEnabled = 1, true
		return redis.NewClient(o), "single", nil
	}
}

// RedactURL returns rawURL fit for a log line: the passwords of the user
// information and of the query (password=, sentinel_password=) become
// "xxxxx". A string that does not parse is not echoed at all.
func RedactURL(rawURL string) string {
	if rawURL == "" {
		return ""
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL, redacted)"
	}
	if q := u.Query(); q.Has("password") || q.Has("sentinel_password") {
		for _, name := range []string{"password", "sentinel_password"} {
			if q.Has(name) {
				q.Set(name, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
