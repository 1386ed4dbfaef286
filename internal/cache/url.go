package cache

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Topology names the kind of deployment a URL selects.
type Topology string

const (
	TopologySingle   Topology = "single"   // one node (or a proxy)
	TopologyCluster  Topology = "cluster"  // Redis Cluster
	TopologySentinel Topology = "sentinel" // master discovered through Sentinel
	TopologyEmbedded Topology = "embedded" // in-process server, not durable
)

// redactedMark replaces every secret RedactURL hides.
const redactedMark = "xxxxx"

// secretParams are the query parameters that carry a password: go-redis reads
// the master's credentials of a Sentinel URL from there.
var secretParams = []string{"password", "sentinel_password"}

// RedactURL returns rawURL fit for a log line or an error: the password of
// the user information and of the query (password, sentinel_password) is
// replaced by "xxxxx". A string that does not parse as a URL is not echoed
// at all, since where its secret sits cannot be known.
func RedactURL(rawURL string) string {
	if rawURL == "" {
		return ""
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL, redacted)"
	}
	q := u.Query()
	changed := false
	for _, name := range secretParams {
		if q.Has(name) {
			q.Set(name, redactedMark)
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// clientSpec is a parsed URL: the topology and a constructor for its client.
type clientSpec struct {
	topology Topology
	addrs    []string
	newFn    func() redis.UniversalClient
}

// parseURL turns a --redis-url into a client constructor, with cfg.Pool
// filling whatever the URL leaves unset. Errors name the flag and never hold
// the password.
func parseURL(rawURL string, pool PoolConfig) (clientSpec, error) {
	u, err := parseRedisURL(rawURL)
	if err != nil {
		return clientSpec{}, err
	}
	spec, err := specFor(u, pool)
	if err != nil {
		return clientSpec{}, fmt.Errorf("cache: invalid --redis-url %s: %w", RedactURL(rawURL), err)
	}
	return spec, nil
}

// parseRedisURL parses rawURL and checks it is a redis:// or rediss:// URL
// with a host.
func parseRedisURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Error repeats the whole URL, password included: keep only why.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("cache: invalid --redis-url: %w", err)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("cache: invalid --redis-url %s: scheme must be redis:// or rediss://, not %q",
			RedactURL(rawURL), u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("cache: invalid --redis-url %s: no host", RedactURL(rawURL))
	}
	return u, nil
}

// specFor picks the topology u selects: Sentinel when it names a master,
// Cluster when it lists addr= seeds or says cluster=true, else one node.
func specFor(u *url.URL, pool PoolConfig) (clientSpec, error) {
	cluster, err := takeClusterParam(u)
	if err != nil {
		return clientSpec{}, err
	}
	q := u.Query()
	switch {
	case q.Has("master_name"):
		return sentinelSpec(u, pool)
	case q.Has("addr") || cluster:
		return clusterSpec(u, pool)
	default:
		return singleSpec(u, pool)
	}
}

// takeClusterParam reads and removes the cluster= parameter: it is ours,
// not go-redis's, so go-redis must not see it.
func takeClusterParam(u *url.URL) (bool, error) {
	q := u.Query()
	if !q.Has("cluster") {
		return false, nil
	}
	cluster, err := strconv.ParseBool(q.Get("cluster"))
	if err != nil {
		return false, fmt.Errorf("cluster=%q is not a boolean", q.Get("cluster"))
	}
	q.Del("cluster")
	u.RawQuery = q.Encode()
	return cluster, nil
}

func sentinelSpec(u *url.URL, pool PoolConfig) (clientSpec, error) {
	o, err := redis.ParseFailoverURL(u.String())
	if err != nil {
		return clientSpec{}, err
	}
	pool.fill(&o.PoolSize, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout,
		&o.DialerRetries, &o.MaxRetries, &o.ContextTimeoutEnabled)
	return clientSpec{
		topology: TopologySentinel,
		addrs:    o.SentinelAddrs,
		newFn: func() redis.UniversalClient {
			// NewFailoverClient panics on these two; the cluster-shaped
			// failover client is the one that routes reads to replicas.
			if o.RouteByLatency || o.RouteRandomly {
				return redis.NewFailoverClusterClient(o)
			}
			return redis.NewFailoverClient(o)
		},
	}, nil
}

func clusterSpec(u *url.URL, pool PoolConfig) (clientSpec, error) {
	// Redis Cluster has no databases; go-redis would silently drop a
	// path, so refuse it rather than surprise the operator.
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return clientSpec{}, fmt.Errorf("a cluster has no database %q", p)
	}
	u.Path = ""
	o, err := redis.ParseClusterURL(u.String())
	if err != nil {
		return clientSpec{}, err
	}
	if o.TLSConfig != nil && o.TLSConfig.MinVersion == 0 {
		o.TLSConfig.MinVersion = tls.VersionTLS12
	}
	pool.fill(&o.PoolSize, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout,
		&o.DialerRetries, &o.MaxRetries, &o.ContextTimeoutEnabled)
	return clientSpec{
		topology: TopologyCluster,
		addrs:    o.Addrs,
		newFn:    func() redis.UniversalClient { return redis.NewClusterClient(o) },
	}, nil
}

func singleSpec(u *url.URL, pool PoolConfig) (clientSpec, error) {
	o, err := redis.ParseURL(u.String())
	if err != nil {
		return clientSpec{}, err
	}
	pool.fill(&o.PoolSize, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout,
		&o.DialerRetries, &o.MaxRetries, &o.ContextTimeoutEnabled)
	return clientSpec{
		topology: TopologySingle,
		addrs:    []string{o.Addr},
		newFn:    func() redis.UniversalClient { return redis.NewClient(o) },
	}, nil
}

// fill sets the go-redis options the URL left unset from p, and turns on
// ContextTimeoutEnabled, without which go-redis ignores context deadlines.
// The three option structs of go-redis share these fields but no type.
func (p PoolConfig) fill(size *int, dial, read, write *time.Duration, dialAttempts, retries *int, ctxTimeout *bool) {
	// go-redis keeps a URL's "disable" (a value <= 0) as -1, so only an
	// exact zero is unset.
	if *size == 0 {
		*size = p.Size
	}
	if *dial == 0 {
		*dial = p.DialTimeout
	}
	if *read == 0 {
		*read = p.ReadTimeout
	}
	if *write == 0 {
		*write = p.WriteTimeout
	}
	if *dialAttempts == 0 {
		*dialAttempts = defaultDialAttempts
	}
	if *retries == 0 {
		*retries = p.MaxRetries
	}
	*ctxTimeout = true
}

// describeAddrs joins addresses for a log line.
func describeAddrs(addrs []string) string {
	if len(addrs) == 1 {
		return addrs[0]
	}
	return "[" + strings.Join(addrs, " ") + "]"
}
