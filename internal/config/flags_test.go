package config_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/downstream"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// setenv sets the variables of m for the rest of the test: ff reads the
// process environment.
func setenv(t *testing.T, m map[string]string) {
	t.Helper()
	for k, v := range m {
		t.Setenv(k, v)
	}
}

func TestParseServeDefaults(t *testing.T) {
	got, err := config.ParseServe(nil)
	if err != nil {
		t.Fatalf("ParseServe(nil): %v", err)
	}
	want := config.Serve{
		Addr:              "127.0.0.1:8080",
		Deadline:          1500 * time.Millisecond,
		Reserve:           100 * time.Millisecond,
		MaxInflight:       1024,
		ShutdownTimeout:   10 * time.Second,
		ReadHeaderTimeout: 5 * time.Second,
		MaxEventStreams:   100,
		Dependencies:      config.DefaultDependencies(),
		URLs:              map[string]string{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseServe(nil) =\n%+v\nwant\n%+v", got, want)
	}
	if !reflect.DeepEqual(config.DefaultServe(), want) {
		t.Errorf("DefaultServe() = %+v, want %+v", config.DefaultServe(), want)
	}
	if !got.EmbeddedDownstreams() {
		t.Error("EmbeddedDownstreams() = false with no URLs")
	}
	if got.LogLevel != slog.LevelInfo {
		t.Errorf("LogLevel = %v, want INFO", got.LogLevel)
	}
}

func TestParseSimDefaults(t *testing.T) {
	got, err := config.ParseSim(nil)
	if err != nil {
		t.Fatalf("ParseSim(nil): %v", err)
	}
	if want := (config.Sim{Addr: "127.0.0.1:9100"}); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(config.DefaultSim(), want) {
		t.Errorf("ParseSim(nil) = %+v, DefaultSim() = %+v, want %+v", got, config.DefaultSim(), want)
	}
}

// serveCases set every serve flag to a non-default value; each is used both
// as a flag and as its environment twin.
var serveCases = []struct {
	flag, value string
	get         func(config.Serve) any
	want        any
}{
	{"addr", "0.0.0.0:9000", func(s config.Serve) any { return s.Addr }, "0.0.0.0:9000"},
	{"redis-url", "rediss://:pw@cache:6380/1", func(s config.Serve) any { return s.RedisURL }, "rediss://:pw@cache:6380/1"},
	{"deadline", "2s", func(s config.Serve) any { return s.Deadline }, 2 * time.Second},
	{"reserve", "150ms", func(s config.Serve) any { return s.Reserve }, 150 * time.Millisecond},
	{"max-inflight", "64", func(s config.Serve) any { return s.MaxInflight }, 64},
	{"shutdown-timeout", "3s", func(s config.Serve) any { return s.ShutdownTimeout }, 3 * time.Second},
	{"log-level", "DEBUG", func(s config.Serve) any { return s.LogLevel }, slog.LevelDebug},
	{"admin-token", "s3cret-s3cret-s3cret", func(s config.Serve) any { return s.AdminToken }, "s3cret-s3cret-s3cret"},
	{"max-event-streams", "7", func(s config.Serve) any { return s.MaxEventStreams }, 7},
	{"downstreams-url", "http://sim:9100", func(s config.Serve) any { return s.URLs["logistics"] }, "http://sim:9100"},
	{"allowed-hosts", "shop.example, shop.internal:8080 ", func(s config.Serve) any { return fmt.Sprint(s.AllowedHosts) }, "[shop.example shop.internal:8080]"},
	{"trusted-proxies", "10.0.0.0/8,192.0.2.7", func(s config.Serve) any { return fmt.Sprint(s.TrustedProxies) }, "[10.0.0.0/8 192.0.2.7]"},
}

func TestServeFlagAndEnvTwin(t *testing.T) {
	for _, tc := range serveCases {
		t.Run(tc.flag, func(t *testing.T) {
			fromFlag, err := config.ParseServe([]string{"--" + tc.flag, tc.value})
			if err != nil {
				t.Fatalf("flag: %v", err)
			}
			envVar := "ORDERAGG_" + strings.ToUpper(strings.ReplaceAll(tc.flag, "-", "_"))
			t.Setenv(envVar, tc.value)
			fromEnv, err := config.ParseServe(nil)
			if err != nil {
				t.Fatalf("env %s: %v", envVar, err)
			}
			if got := tc.get(fromFlag); got != tc.want {
				t.Errorf("--%s %s: got %v, want %v", tc.flag, tc.value, got, tc.want)
			}
			if got := tc.get(fromEnv); got != tc.want {
				t.Errorf("%s=%s: got %v, want %v", envVar, tc.value, got, tc.want)
			}
		})
	}
}

func TestServeGroupedFlags(t *testing.T) {
	builtin := []string{"order", "inventory", "coupon", "logistics"}
	urls := []string{
		"--order-url", "http://sim:9100", "--inventory-url", "http://sim:9100",
		"--coupon-url", "https://coupon.internal/api", "--logistics-url", "http://sim:9100/",
		"--admin-addr", "127.0.0.1:0", "--admin-token", "t-at-least-16-bytes",
	}
	env := map[string]string{
		"ORDERAGG_ORDER_URL": "http://a", "ORDERAGG_INVENTORY_URL": "http://b",
		"ORDERAGG_COUPON_URL": "http://c", "ORDERAGG_LOGISTICS_URL": "http://d",
		"ORDERAGG_ADMIN_ADDR": ":9090", "ORDERAGG_ADMIN_TOKEN": "t-at-least-16-bytes",
	}
	// All or none: every downstream registered after the built-ins needs
	// its URL too.
	for _, name := range downstream.Names() {
		if !slices.Contains(builtin, name) {
			urls = append(urls, "--"+name+"-url", "http://sim:9100/"+name)
			env["ORDERAGG_"+strings.ToUpper(name)+"_URL"] = "http://e/" + name
		}
	}
	s, err := config.ParseServe(urls)
	if err != nil {
		t.Fatalf("ParseServe: %v", err)
	}
	if s.URLs["order"] != "http://sim:9100" || s.URLs["coupon"] != "https://coupon.internal/api" || s.URLs["logistics"] != "http://sim:9100/" {
		t.Errorf("URLs not set: %+v", s)
	}
	for _, name := range downstream.Names() {
		if !slices.Contains(builtin, name) && s.URLs[name] != "http://sim:9100/"+name {
			t.Errorf("--%s-url not set: %+v", name, s.URLs)
		}
	}
	if s.EmbeddedDownstreams() {
		t.Error("EmbeddedDownstreams() = true with every URL")
	}
	if s.AdminAddr != "127.0.0.1:0" {
		t.Errorf("AdminAddr = %q", s.AdminAddr)
	}

	setenv(t, env)
	s, err = config.ParseServe(nil)
	if err != nil {
		t.Fatalf("ParseServe from env: %v", err)
	}
	if s.URLs["order"] != "http://a" || s.URLs["inventory"] != "http://b" || s.URLs["coupon"] != "http://c" || s.URLs["logistics"] != "http://d" || s.AdminAddr != ":9090" {
		t.Errorf("env twins not applied: %+v", s)
	}
	for _, name := range downstream.Names() {
		if !slices.Contains(builtin, name) && s.URLs[name] != "http://e/"+name {
			t.Errorf("ORDERAGG_%s_URL not applied: %+v", strings.ToUpper(name), s.URLs)
		}
	}
}

func TestSimFlagAndEnvTwin(t *testing.T) {
	t.Setenv("ORDERAGG_ADDR", "bad")
	s, err := config.ParseSim([]string{"-addr=:0", "--log-level", "warn"})
	if err != nil {
		t.Fatalf("ParseSim: %v", err)
	}
	if s.Addr != ":0" || s.LogLevel != slog.LevelWarn {
		t.Errorf("ParseSim = %+v", s)
	}
	setenv(t, map[string]string{"ORDERAGG_ADDR": "127.0.0.1:9200", "ORDERAGG_LOG_LEVEL": "error"})
	s, err = config.ParseSim(nil)
	if err != nil {
		t.Fatalf("ParseSim from env: %v", err)
	}
	if s.Addr != "127.0.0.1:9200" || s.LogLevel != slog.LevelError {
		t.Errorf("ParseSim from env = %+v", s)
	}
}

func TestFlagsBeatEnvironment(t *testing.T) {
	setenv(t, map[string]string{
		"ORDERAGG_DEADLINE":     "not-even-a-duration", // never parsed: the flag wins
		"ORDERAGG_MAX_INFLIGHT": "7",
		"ORDERAGG_ADDR":         "127.0.0.1:1",
	})
	s, err := config.ParseServe([]string{"--deadline=2s", "--addr", "127.0.0.1:2"})
	if err != nil {
		t.Fatalf("ParseServe: %v", err)
	}
	if s.Deadline != 2*time.Second || s.Addr != "127.0.0.1:2" {
		t.Errorf("flag lost to env: deadline %v addr %q", s.Deadline, s.Addr)
	}
	if s.MaxInflight != 7 {
		t.Errorf("env lost to default: max inflight %d", s.MaxInflight)
	}
}

func TestEmptyEnvironmentVariableIsUnset(t *testing.T) {
	setenv(t, map[string]string{"ORDERAGG_ADDR": "", "ORDERAGG_DEADLINE": ""})
	s, err := config.ParseServe(nil)
	if err != nil {
		t.Fatalf("ParseServe: %v", err)
	}
	if s.Addr != "127.0.0.1:8080" || s.Deadline != 1500*time.Millisecond {
		t.Errorf("empty variables replaced defaults: %+v", s)
	}
}

func TestServeBadValues(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // substrings of the one-line message
	}{
		{"bad duration", []string{"--deadline", "abc"}, nil,
			[]string{`--deadline (ORDERAGG_DEADLINE): invalid value "abc"`}},
		{"bad duration from env", nil, map[string]string{"ORDERAGG_RESERVE": "5"},
			[]string{`--reserve (ORDERAGG_RESERVE):`, `"ORDERAGG_RESERVE"`}},
		{"zero duration", []string{"--shutdown-timeout", "0s"}, nil,
			[]string{"--shutdown-timeout (ORDERAGG_SHUTDOWN_TIMEOUT)", "must be positive"}},
		{"negative duration", []string{"--deadline=-1s"}, nil,
			[]string{"--deadline (ORDERAGG_DEADLINE)", "must be positive, got -1s"}},
		{"not a number", []string{"--max-inflight", "many"}, nil,
			[]string{`--max-inflight (ORDERAGG_MAX_INFLIGHT): invalid value "many"`}},
		{"zero size", nil, map[string]string{"ORDERAGG_MAX_INFLIGHT": "0"},
			[]string{"--max-inflight (ORDERAGG_MAX_INFLIGHT)", "must be positive, got 0"}},
		{"negative size", []string{"--max-inflight", "-3"}, nil,
			[]string{"--max-inflight (ORDERAGG_MAX_INFLIGHT)", "must be positive, got -3"}},
		{"URL without scheme", []string{"--order-url", "sim:9100"}, nil,
			[]string{"--order-url (ORDERAGG_ORDER_URL)", "scheme must be http or https"}},
		{"URL without host", []string{"--coupon-url", "http:///x"}, nil,
			[]string{"--coupon-url (ORDERAGG_COUPON_URL)", "missing host"}},
		{"URL with query", []string{"--logistics-url", "http://h/?a=1"}, nil,
			[]string{"--logistics-url (ORDERAGG_LOGISTICS_URL)", "no query"}},
		{"unparsable URL", []string{"--inventory-url", "http://[::1"}, nil,
			[]string{"--inventory-url (ORDERAGG_INVENTORY_URL)"}},
		{"redis URL with http scheme", []string{"--redis-url", "http://cache:6379"}, nil,
			[]string{"--redis-url (ORDERAGG_REDIS_URL)", "scheme must be redis or rediss"}},
		{"addr without port", []string{"--addr", "localhost"}, nil,
			[]string{"--addr (ORDERAGG_ADDR)", "want host:port"}},
		{"addr with bad port", []string{"--addr", "localhost:99999"}, nil,
			[]string{"--addr (ORDERAGG_ADDR)", "port 0..65535"}},
		{"empty addr", []string{"--addr="}, nil,
			[]string{"--addr (ORDERAGG_ADDR)"}},
		{"bad admin addr", []string{"--admin-addr", "x", "--admin-token", "t"}, nil,
			[]string{"--admin-addr (ORDERAGG_ADMIN_ADDR)"}},
		{"unknown log level", []string{"--log-level", "verbose"}, nil,
			[]string{`--log-level (ORDERAGG_LOG_LEVEL): invalid value "verbose"`}},
		{"partial URLs", []string{"--order-url", "http://sim:9100", "--coupon-url", "http://sim:9100"}, nil,
			[]string{"set every downstream URL, or --downstreams-url (ORDERAGG_DOWNSTREAMS_URL) for the rest, or none", "missing " + urlFlags([]string{"order", "coupon"})}},
		{"partial URLs from env", nil, map[string]string{"ORDERAGG_LOGISTICS_URL": "http://sim:9100"},
			[]string{"missing " + urlFlags([]string{"logistics"})}},
		{"admin addr without token", []string{"--admin-addr", "127.0.0.1:9090"}, nil,
			[]string{"--admin-addr (ORDERAGG_ADMIN_ADDR): needs --admin-token or --admin-token-file"}},
		{"short admin token", []string{"--admin-addr", "127.0.0.1:9090", "--admin-token", "fifteen-bytes!!"}, nil,
			[]string{"--admin-token (ORDERAGG_ADMIN_TOKEN): the token must be at least 16 bytes, got 15"}},
		{"short admin token without admin addr", nil, map[string]string{"ORDERAGG_ADMIN_TOKEN": "short"},
			[]string{"--admin-token (ORDERAGG_ADMIN_TOKEN): the token must be at least 16 bytes, got 5"}},
		{"admin token and token file", []string{"--admin-token", "0123456789abcdef", "--admin-token-file", "/dev/null"}, nil,
			[]string{"--admin-token-file (ORDERAGG_ADMIN_TOKEN_FILE): exclusive with --admin-token"}},
		{"missing admin token file", []string{"--admin-addr", ":0", "--admin-token-file", "/nonexistent/token"}, nil,
			[]string{"--admin-token-file (ORDERAGG_ADMIN_TOKEN_FILE): open /nonexistent/token"}},
		{"bad downstreams URL", []string{"--downstreams-url", "sim:9100"}, nil,
			[]string{"--downstreams-url (ORDERAGG_DOWNSTREAMS_URL)", "scheme must be http or https"}},
		{"zero event streams", []string{"--max-event-streams", "0"}, nil,
			[]string{"--max-event-streams (ORDERAGG_MAX_EVENT_STREAMS)", "must be positive"}},
		{"deadline not above reserve", []string{"--deadline", "100ms"}, nil,
			[]string{"--reserve (ORDERAGG_RESERVE): 100ms must be shorter than --deadline 100ms"}},
		{"dependency timeout not under the calls' end", []string{"--deadline", "1100ms"}, nil,
			[]string{"dependencies.order.timeout: 1s must be shorter than --deadline 1.1s minus --reserve 100ms = 1s"}},
		{"reserve not above the cache read", []string{"--reserve", "50ms"}, nil,
			[]string{"--reserve (ORDERAGG_RESERVE): 50ms must be longer than dependencies.cache.timeout 50ms"}},
		{"bad allowed host", []string{"--allowed-hosts", "shop.example,http://x/"}, nil,
			[]string{"--allowed-hosts (ORDERAGG_ALLOWED_HOSTS):", `want host names or *, got "http://x/"`}},
		{"bad trusted proxy", nil, map[string]string{"ORDERAGG_TRUSTED_PROXIES": "10.0.0.0/33"},
			[]string{"--trusted-proxies (ORDERAGG_TRUSTED_PROXIES):", "want IP addresses or CIDR prefixes"}},
		{"unknown flag", []string{"--adress", ":1"}, nil,
			[]string{"flag provided but not defined: -adress"}},
		{"flag without value", []string{"--deadline"}, nil,
			[]string{"flag needs an argument: -deadline"}},
		{"positional argument", []string{"--addr", ":1", "extra"}, nil,
			[]string{`unexpected argument "extra"`}},
		{"missing config file", []string{"--config", "/nonexistent/orderagg.yaml"}, nil,
			[]string{"config file", "/nonexistent/orderagg.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			setenv(t, tc.env)
			_, err := config.ParseServe(tc.args)
			if err == nil {
				t.Fatal("ParseServe succeeded, want an error")
			}
			if !errors.Is(err, config.ErrUsage) {
				t.Errorf("error %q does not match ErrUsage", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestSimBadValues(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--addr", "nope"}, nil, "--addr (ORDERAGG_ADDR)"},
		{nil, map[string]string{"ORDERAGG_LOG_LEVEL": "loud"}, "--log-level (ORDERAGG_LOG_LEVEL)"},
		{[]string{"--deadline", "1s"}, nil, "flag provided but not defined: -deadline"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			setenv(t, tc.env)
			_, err := config.ParseSim(tc.args)
			if !errors.Is(err, config.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseSim(%q, %v) = %v, want a usage error containing %q", tc.args, tc.env, err, tc.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Setenv("ORDERAGG_DEADLINE", "abc") // --help must work even so
	for _, arg := range []string{"-h", "--help", "-help", "--h"} {
		if _, err := config.ParseServe([]string{arg}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("ParseServe(%q) = %v, want flag.ErrHelp", arg, err)
		}
		if _, err := config.ParseSim([]string{arg}); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("ParseSim(%q) = %v, want flag.ErrHelp", arg, err)
		}
	}
	_, err := config.ParseServe([]string{"--help"})
	if errors.Is(err, config.ErrUsage) {
		t.Error("--help matches ErrUsage; it must exit 0, not 2")
	}
}

// TestUsageListsEveryFlag: --help lists every flag with its variable and
// default, and each flag's variable is its name in upper case.
func TestUsageListsEveryFlag(t *testing.T) {
	serve, sim := config.DefaultServe(), config.DefaultSim()
	for name, tc := range map[string]struct {
		fs    *flag.FlagSet
		count int
	}{
		"serve": {config.ServeFlags(&serve), 16 + len(downstream.Names())}, // one --NAME-url per downstream
		"sim":   {config.SimFlags(&sim), 3},
	} {
		var b bytes.Buffer
		config.PrintUsage(&b, tc.fs, config.EnvPrefix, name, "")
		n := 0
		tc.fs.VisitAll(func(f *flag.Flag) {
			n++
			typ, help := flag.UnquoteUsage(f)
			env := "ORDERAGG_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			def := f.DefValue
			if def == "" {
				def = "empty"
			}
			if line := fmt.Sprintf("--%s %s  (%s, default %s)\n    \t%s\n", f.Name, typ, env, def, help); !strings.Contains(b.String(), line) {
				t.Errorf("%s usage lacks %q", name, line)
			}
		})
		if n != tc.count {
			t.Errorf("%s has %d flags, want %d", name, n, tc.count)
		}
	}
}

// TestUsageDefaultsParse: every default --help shows, fed back as a flag,
// gives the default configuration.
func TestUsageDefaultsParse(t *testing.T) {
	def := config.DefaultServe()
	var args []string
	config.ServeFlags(&def).VisitAll(func(f *flag.Flag) {
		if f.DefValue != "" {
			args = append(args, "--"+f.Name+"="+f.DefValue)
		}
	})
	got, err := config.ParseServe(args)
	if err != nil {
		t.Fatalf("ParseServe(%q): %v", args, err)
	}
	if !reflect.DeepEqual(got, config.DefaultServe()) {
		t.Errorf("defaults from --help = %+v, want %+v", got, config.DefaultServe())
	}
}

func TestParseServeLoadsConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "deps.yaml")
	writeFile(t, path, "dependencies:\n  coupon:\n    timeout: 200ms\n")

	t.Setenv("ORDERAGG_CONFIG", path)
	s, err := config.ParseServe(nil)
	if err != nil {
		t.Fatalf("ParseServe: %v", err)
	}
	if s.ConfigFile != path || must(s.Dependencies, "coupon").Timeout != 200*time.Millisecond {
		t.Errorf("config file not applied: %q, coupon timeout %v", s.ConfigFile, must(s.Dependencies, "coupon").Timeout)
	}
	if must(s.Dependencies, "order") != must(config.DefaultDependencies(), "order") {
		t.Error("a dependency the file leaves out changed")
	}

	// A file that is fine on its own but too slow for the deadline.
	writeFile(t, path, "dependencies:\n  coupon:\n    timeout: 2s\n")
	_, err = config.ParseServe([]string{"--config", path})
	if !errors.Is(err, config.ErrUsage) || !strings.Contains(err.Error(), "dependencies.coupon.timeout (line 3): 2s must be shorter than --deadline") {
		t.Errorf("ParseServe = %v, want a usage error about dependencies.coupon.timeout", err)
	}
	// A longer deadline makes the same file valid.
	if _, err := config.ParseServe([]string{"--config", path, "--deadline", "3s"}); err != nil {
		t.Errorf("ParseServe with --deadline 3s: %v", err)
	}

	writeFile(t, path, "dependencies:\n  coupon:\n    breaker:\n      windw: 1s\n")
	_, err = config.ParseServe([]string{"--config", path})
	if !errors.Is(err, config.ErrUsage) || !strings.Contains(err.Error(), `line 4: unknown key "windw"`) {
		t.Errorf("ParseServe = %v, want a usage error naming the unknown key", err)
	}
}

// urlFlags lists, as the all-or-none error does, the URL flags of the
// registered downstreams not in set.
func urlFlags(set []string) string {
	var out []string
	for _, name := range downstream.Names() {
		if !slices.Contains(set, name) {
			out = append(out, "--"+name+"-url")
		}
	}
	return strings.Join(out, ", ")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// --redis-url takes the cluster and Sentinel forms, whose seeds and options
// are in the query, and an error or log line never shows its password.
func TestRedisURLForms(t *testing.T) {
	for _, u := range []string{
		"redis://r1:6379?addr=r2:6379&addr=r3:6379",
		"redis://r1:6379?cluster=true",
		"redis://s1:26379?addr=s2:26379&master_name=mymaster&password=pw-hunter2",
	} {
		s, err := config.ParseServe([]string{"--redis-url", u})
		if err != nil || s.RedisURL != u {
			t.Errorf("--redis-url %s: %q, %v", u, s.RedisURL, err)
		}
	}
	_, err := config.ParseServe([]string{"--redis-url", "redis://:pw-hunter2@cache:6379/0#frag"})
	if err == nil || !strings.Contains(err.Error(), "--redis-url") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad --redis-url: %v (want an error naming the flag, without the password)", err)
	}
}
