package cache

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// build parses rawURL and builds its client, closed when the test ends
// (go-redis connects lazily, so nothing is dialled).
func build(t *testing.T, rawURL string) redis.UniversalClient {
	t.Helper()
	c, err := newClient(rawURL)
	if err != nil {
		t.Fatalf("newClient(%q): %v", rawURL, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestParseURLSingle(t *testing.T) {
	o := build(t, "redis://app:pw@cache.internal:6380/3").(*redis.Client).Options()
	if o.Addr != "cache.internal:6380" || o.DB != 3 || o.Username != "app" || o.Password != "pw" {
		t.Errorf("addr %q db %d user %q", o.Addr, o.DB, o.Username)
	}
	if o.TLSConfig != nil {
		t.Error("redis:// must not use TLS")
	}
	// Our defaults fill what the URL leaves unset.
	if o.PoolSize != 64 || o.DialTimeout != 200*time.Millisecond || o.ReadTimeout != 100*time.Millisecond ||
		o.WriteTimeout != 100*time.Millisecond || !o.ContextTimeoutEnabled || o.MaxRetries > 0 || o.DialerRetries != 1 {
		t.Errorf("pool = size %d dial %v read %v write %v ctx %v retries %d dial attempts %d",
			o.PoolSize, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries)
	}
}

func TestParseURLQueryWins(t *testing.T) {
	o := build(t, "redis://h:6379?pool_size=7&read_timeout=2s&max_retries=2").(*redis.Client).Options()
	if o.PoolSize != 7 || o.ReadTimeout != 2*time.Second || o.MaxRetries != 2 {
		t.Errorf("pool = size %d read %v retries %d, want the URL's", o.PoolSize, o.ReadTimeout, o.MaxRetries)
	}
}

func TestParseURLTLS(t *testing.T) {
	o := build(t, "rediss://h.example:6380").(*redis.Client).Options()
	if o.TLSConfig == nil || o.TLSConfig.ServerName != "h.example" || o.TLSConfig.MinVersion < tls.VersionTLS12 {
		t.Errorf("TLS config = %+v", o.TLSConfig)
	}
}

// A cluster's TLS config may leave MinVersion 0: Go's default for clients, TLS 1.2.
func TestParseURLCluster(t *testing.T) {
	o := build(t, "rediss://:pw@n1:7000?addr=n2:7000&addr=n3:7000").(*redis.ClusterClient).Options()
	if len(o.Addrs) != 3 {
		t.Fatalf("addrs %v", o.Addrs)
	}
	if o.TLSConfig == nil || (o.TLSConfig.MinVersion != 0 && o.TLSConfig.MinVersion < tls.VersionTLS12) || o.Password != "pw" || !o.ContextTimeoutEnabled || o.PoolSize != 64 || o.DialerRetries != 1 {
		t.Errorf("cluster options: tls %+v ctx %v pool %d dial attempts %d", o.TLSConfig, o.ContextTimeoutEnabled, o.PoolSize, o.DialerRetries)
	}
	if c, ok := build(t, "redis://config-endpoint:6379?cluster=true").(*redis.ClusterClient); !ok || len(c.Options().Addrs) != 1 {
		t.Errorf("cluster=true: %T", c)
	}
	if c, ok := build(t, "redis://h:6379?cluster=false").(*redis.Client); !ok {
		t.Errorf("cluster=false: %T", c)
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
		{"bad cluster flag", "redis://h?cluster=maybe", "not a boolean"},
		{"bad cluster addr", "redis://u:" + secret + "@h?addr=nope", "addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newClient(tt.url)
			if err == nil {
				t.Fatalf("newClient(%q) succeeded", tt.url)
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

// A bad URL is the one thing Open refuses.
func TestOpenRejectsBadURL(t *testing.T) {
	_, err := Open(t.Context(), Config{URL: "memcached://h:11211"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--redis-url") {
		t.Errorf("err = %v, want one naming --redis-url", err)
	}
}
