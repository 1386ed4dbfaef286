package cache

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// build parses rawURL with the default pool and builds its client, closed
// when the test ends (go-redis connects lazily, so nothing is dialled).
func build(t *testing.T, rawURL string) (clientSpec, redis.UniversalClient) {
	t.Helper()
	spec, err := parseURL(rawURL, Config{}.withDefaults().Pool)
	if err != nil {
		t.Fatalf("parseURL(%q): %v", rawURL, err)
	}
	c := spec.newFn()
	t.Cleanup(func() { _ = c.Close() })
	return spec, c
}

func TestParseURLSingle(t *testing.T) {
	spec, c := build(t, "redis://app:pw@cache.internal:6380/3")
	if spec.topology != TopologySingle {
		t.Fatalf("topology = %q", spec.topology)
	}
	o := c.(*redis.Client).Options()
	if o.Addr != "cache.internal:6380" || o.DB != 3 || o.Username != "app" || o.Password != "pw" {
		t.Errorf("options = addr %q db %d user %q", o.Addr, o.DB, o.Username)
	}
	if o.TLSConfig != nil {
		t.Error("redis:// must not use TLS")
	}
	// Our defaults fill what the URL leaves unset.
	if o.PoolSize != DefaultPoolSize || o.DialTimeout != DefaultDialTimeout ||
		o.ReadTimeout != DefaultSocketReadTimeout || o.WriteTimeout != DefaultSocketWriteTimeout ||
		!o.ContextTimeoutEnabled || o.MaxRetries > 0 || o.DialerRetries != 1 {
		t.Errorf("pool = size %d dial %v read %v write %v ctx %v retries %d dial attempts %d",
			o.PoolSize, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries)
	}
}

func TestParseURLQueryWins(t *testing.T) {
	_, c := build(t, "redis://h:6379?pool_size=7&read_timeout=2s&max_retries=2")
	o := c.(*redis.Client).Options()
	if o.PoolSize != 7 || o.ReadTimeout != 2*time.Second || o.MaxRetries != 2 {
		t.Errorf("pool = size %d read %v retries %d, want the URL's", o.PoolSize, o.ReadTimeout, o.MaxRetries)
	}
}

func TestParseURLTLS(t *testing.T) {
	_, c := build(t, "rediss://h.example:6380")
	o := c.(*redis.Client).Options()
	if o.TLSConfig == nil || o.TLSConfig.ServerName != "h.example" || o.TLSConfig.MinVersion < tls.VersionTLS12 {
		t.Errorf("TLS config = %+v", o.TLSConfig)
	}
}

func TestParseURLCluster(t *testing.T) {
	spec, c := build(t, "rediss://:pw@n1:7000?addr=n2:7000&addr=n3:7000")
	if spec.topology != TopologyCluster || len(spec.addrs) != 3 {
		t.Fatalf("topology %q addrs %v", spec.topology, spec.addrs)
	}
	o := c.(*redis.ClusterClient).Options()
	if o.TLSConfig == nil || o.TLSConfig.MinVersion < tls.VersionTLS12 || o.Password != "pw" || !o.ContextTimeoutEnabled || o.PoolSize != DefaultPoolSize {
		t.Errorf("cluster options: tls %+v ctx %v pool %d", o.TLSConfig, o.ContextTimeoutEnabled, o.PoolSize)
	}

	spec, _ = build(t, "redis://config-endpoint:6379?cluster=true")
	if spec.topology != TopologyCluster || len(spec.addrs) != 1 {
		t.Errorf("cluster=true: topology %q addrs %v", spec.topology, spec.addrs)
	}
	spec, _ = build(t, "redis://h:6379?cluster=false")
	if spec.topology != TopologySingle {
		t.Errorf("cluster=false: topology %q", spec.topology)
	}
}

func TestParseURLSentinel(t *testing.T) {
	spec, c := build(t, "redis://s1:26379/1?master_name=mymaster&addr=s2:26379&password=masterpw")
	if spec.topology != TopologySentinel || len(spec.addrs) != 2 {
		t.Fatalf("topology %q addrs %v", spec.topology, spec.addrs)
	}
	if _, ok := c.(*redis.Client); !ok {
		t.Errorf("client is %T, want a failover *redis.Client", c)
	}
	// Reads routed to replicas need go-redis's other failover client, which
	// NewFailoverClient would panic about.
	_, c = build(t, "redis://s1:26379?master_name=mymaster&route_randomly=true")
	if _, ok := c.(*redis.ClusterClient); !ok {
		t.Errorf("route_randomly: client is %T, want *redis.ClusterClient", c)
	}
}

func TestParseURLErrors(t *testing.T) {
	const secret = "hunter2"
	tests := []struct{ name, url, want string }{
		{"http scheme", "http://h:6379", "scheme must be redis:// or rediss://"},
		{"no scheme", "localhost:6379", "scheme must be"},
		{"unix socket", "unix:///tmp/redis.sock", "scheme must be"},
		{"not a URL", "redis://u:" + secret + "%zz@h", "invalid --redis-url"},
		{"no host", "redis://", "no host"},
		{"bad database", "redis://u:" + secret + "@h:6379/abc", "invalid database"},
		{"unknown option", "redis://u:" + secret + "@h?frobnicate=1", "unexpected option"},
		{"unknown cluster option", "redis://u:" + secret + "@h?addr=h2:1&x=1", "unexpected option"},
		{"cluster with db", "redis://h:6379/2?cluster=true", "no database"},
		{"bad cluster flag", "redis://h?cluster=maybe", "not a boolean"},
		{"bad sentinel addr", "redis://u:" + secret + "@h?master_name=m&addr=nope", "addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseURL(tt.url, PoolConfig{})
			if err == nil {
				t.Fatalf("parseURL(%q) succeeded", tt.url)
			}
			msg := err.Error()
			if !strings.Contains(msg, "--redis-url") || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q: want it to name --redis-url and say %q", msg, tt.want)
			}
			if strings.Contains(msg, secret) {
				t.Errorf("error %q leaks the password", msg)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"redis://h:6379/0", "redis://h:6379/0"},
		{"redis://app:hunter2@h:6379/0", "redis://app:xxxxx@h:6379/0"},
		{"rediss://:hunter2@h:6380", "rediss://:xxxxx@h:6380"},
		{"redis://s:hunter2@s1:26379?master_name=m&password=hunter2", "redis://s:xxxxx@s1:26379?master_name=m&password=xxxxx"},
		{"redis://h?sentinel_password=hunter2", "redis://h?sentinel_password=xxxxx"},
		{"redis://u:hun%zzter2@h", "(unparsable URL, redacted)"},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A bad URL is the one thing Open refuses.
func TestOpenRejectsBadURL(t *testing.T) {
	_, err := Open(t.Context(), Config{URL: "memcached://h:11211"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--redis-url") {
		t.Errorf("err = %v, want one naming --redis-url", err)
	}
}
