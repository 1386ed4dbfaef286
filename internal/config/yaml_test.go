package config_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/resilience"
)

func TestDefaultDependencies(t *testing.T) {
	d := config.DefaultDependencies()
	type row struct {
		name                 string
		timeout              time.Duration
		bulkhead, maxAttempt int
		maxAge               time.Duration
	}
	// Bulkheads: --max-inflight's 1024 pages, one slot each; one last-good
	// read a page per downstream for the cache.
	tests := []row{
		{"order", 1000 * time.Millisecond, 1024, 2, 24 * time.Hour},
		{"inventory", 600 * time.Millisecond, 1024, 2, 60 * time.Second},
		{"coupon", 300 * time.Millisecond, 1024, 2, 5 * time.Minute},
		{"logistics", 500 * time.Millisecond, 1024, 2, 30 * time.Minute},
	}
	// A downstream registered after the built-ins gets its entry's numbers,
	// completed by the resilience defaults, and one bulkhead slot a page
	// unless it chose its own.
	for _, e := range downstream.Registered()[min(len(tests), len(downstream.Names())):] {
		c := e.Defaults.WithDefaults()
		bulkhead := 1024
		if e.Defaults.Bulkhead.MaxConcurrent != 0 {
			bulkhead = c.Bulkhead.MaxConcurrent
		}
		tests = append(tests, row{e.Name, c.Timeout, bulkhead, c.Retry.MaxAttempts, e.CacheMaxAge})
	}
	tests = append(tests, row{"cache", 50 * time.Millisecond, 1024 * len(downstream.Names()), 1, 0})
	var want []string
	for _, tc := range tests {
		want = append(want, tc.name)
	}
	if names := d.Names(); !slices.Equal(names, want) {
		t.Errorf("Names() = %v, want %v", names, want)
	}
	for i, tc := range tests {
		dep, ok := d.Get(tc.name)
		if !ok {
			t.Fatalf("Get(%q) not found", tc.name)
		}
		if d.Names()[i] != tc.name {
			t.Errorf("Names()[%d] = %q, want %q", i, d.Names()[i], tc.name)
		}
		if dep.Timeout != tc.timeout || dep.Bulkhead.MaxConcurrent != tc.bulkhead || dep.Retry.MaxAttempts != tc.maxAttempt || dep.CacheMaxAge != tc.maxAge {
			t.Errorf("%s = timeout %v bulkhead %d attempts %d max age %v, want %+v", tc.name,
				dep.Timeout, dep.Bulkhead.MaxConcurrent, dep.Retry.MaxAttempts, dep.CacheMaxAge, tc)
		}
		if dep.Breaker.MinRequests != 20 {
			t.Errorf("%s breaker.min_requests = %d, want 20", tc.name, dep.Breaker.MinRequests)
		}
		if dep.Config != dep.Config.WithDefaults() {
			t.Errorf("%s is not completed with defaults: %+v", tc.name, dep.Config)
		}
	}
	if _, ok := d.Get("payment"); ok {
		t.Error(`Get("payment") found something`)
	}
	if err := d.Validate(1500 * time.Millisecond); err != nil {
		t.Errorf("defaults are invalid: %v", err)
	}
	// A Dependencies is a value: Update changes the copy it is called on,
	// never another one sharing its settings.
	cp := d
	if !cp.Update("coupon", func(x *config.Dependency) { x.Timeout = time.Millisecond }) {
		t.Fatal("Update(coupon) refused a known name")
	}
	if must(cp, "coupon").Timeout != time.Millisecond || must(d, "coupon").Timeout == time.Millisecond {
		t.Errorf("Update: copy %v, original %v", must(cp, "coupon").Timeout, must(d, "coupon").Timeout)
	}
	if cp.Update("payment", func(*config.Dependency) {}) || cp.Set("payment", config.Dependency{}) {
		t.Error("Update/Set accepted an unknown name")
	}
}

func TestLoadDependencies(t *testing.T) {
	def := config.DefaultDependencies()
	tests := []struct {
		name    string
		content string
		want    func(d *config.Dependencies) // edits def into the expected result
		errs    []string                     // or: substrings of the error
	}{
		{name: "empty file", content: "", want: func(*config.Dependencies) {}},
		{name: "only comments", content: "# nothing yet\n", want: func(*config.Dependencies) {}},
		{name: "empty sections", content: "dependencies:\n  coupon:\n", want: func(*config.Dependencies) {}},
		{
			name:    "some keys",
			content: "dependencies:\n  coupon:\n    timeout: 200ms\n    breaker:\n      sleep_window: 10s\n  cache:\n    hedge: {enabled: true}\n",
			want: func(d *config.Dependencies) {
				d.Update("coupon", func(x *config.Dependency) { x.Timeout = 200 * time.Millisecond })
				d.Update("coupon", func(x *config.Dependency) { x.Breaker.SleepWindow = 10 * time.Second })
				d.Update("cache", func(x *config.Dependency) { x.Hedge.Enabled = true })
			},
		},
		{
			name:    "aliases",
			content: "dependencies:\n  order:\n    breaker: &b\n      sleep_window: 7s\n  coupon:\n    breaker: *b\n",
			want: func(d *config.Dependencies) {
				d.Update("order", func(x *config.Dependency) { x.Breaker.SleepWindow = 7 * time.Second })
				d.Update("coupon", func(x *config.Dependency) { x.Breaker.SleepWindow = 7 * time.Second })
			},
		},
		{
			name:    "JSON file",
			content: `{"dependencies": {"logistics": {"cache_max_age": "1h", "retry": {"budget_percent": 12.5}}}}`,
			want: func(d *config.Dependencies) {
				d.Update("logistics", func(x *config.Dependency) { x.CacheMaxAge = time.Hour })
				d.Update("logistics", func(x *config.Dependency) { x.Retry.BudgetPercent = 12.5 })
			},
		},
		{name: "unknown top-level key", content: "dependency:\n  order: {}\n",
			errs: []string{"dependency: unknown key (known: dependencies) (line 1)"}},
		{name: "unknown dependency", content: "dependencies:\n  payment:\n    timeout: 1s\n",
			errs: []string{"dependencies.payment: unknown key (known: " + strings.Join(append(downstream.Names(), "cache"), ", ") + ") (line 2)"}},
		{name: "unknown nested key", content: "dependencies:\n  coupon:\n    breaker:\n      windw: 1s\n",
			errs: []string{"dependencies.coupon.breaker.windw: unknown key (known: window, buckets, min_requests,", "(line 4)"}},
		{name: "bad duration", content: "dependencies:\n  coupon:\n    timeout: abc\n",
			errs: []string{`dependencies.coupon.timeout: must be a duration such as "300ms" or "auto", got "abc" (line 3)`}},
		{name: "duration without unit", content: "dependencies:\n  coupon:\n    timeout: 300\n",
			errs: []string{`dependencies.coupon.timeout: must be a duration such as "300ms", got 300`}},
		{name: "bad int", content: "dependencies:\n  order:\n    bulkhead:\n      max_concurrent: lots\n",
			errs: []string{`dependencies.order.bulkhead.max_concurrent: must be a whole number, got "lots"`}},
		{name: "float for int", content: "dependencies:\n  order:\n    bulkhead:\n      max_concurrent: 1.5\n",
			errs: []string{"dependencies.order.bulkhead.max_concurrent: must be a whole number, got 1.5"}},
		{name: "not a finite number", content: "dependencies:\n  order:\n    breaker:\n      error_percent: .nan\n",
			errs: []string{"dependencies.order.breaker.error_percent: must be a finite number"}},
		{name: "bad bool", content: "dependencies:\n  order:\n    hedge:\n      enabled: maybe\n",
			errs: []string{`dependencies.order.hedge.enabled: must be true or false, got "maybe"`}},
		{name: "section is a scalar", content: "dependencies:\n  order:\n    breaker: 5\n",
			errs: []string{"dependencies.order.breaker: must be a mapping of keys to values, got 5"}},
		{name: "leaf is a mapping", content: "dependencies:\n  order:\n    timeout: {ms: 5}\n",
			errs: []string{"dependencies.order.timeout: must be a single value, got a mapping"}},
		{name: "leaf is a list", content: "dependencies:\n  order:\n    timeout: [1s]\n",
			errs: []string{"dependencies.order.timeout: must be a single value, got a list"}},
		{name: "leaf without value", content: "dependencies:\n  order:\n    timeout:\n",
			errs: []string{"dependencies.order.timeout: has no value; leave the key out"}},
		{name: "top level is a list", content: "- order\n",
			errs: []string{"(top level): must be a mapping"}},
		{name: "zero that would become a generic default", content: "dependencies:\n  order:\n    bulkhead:\n      max_concurrent: 0\n",
			errs: []string{"dependencies.order.bulkhead.max_concurrent: must not be 0: zero would silently become the generic default 50; leave the key out to keep 1024"}},
		{name: "zero duration that would become a generic default", content: "dependencies:\n  coupon:\n    timeout: 0s\n",
			errs: []string{"dependencies.coupon.timeout: must not be 0s: zero would silently become the generic default 1s; leave the key out to keep 300ms"}},
		{name: "invalid after validation", content: "dependencies:\n  coupon:\n    breaker:\n      window: 5ms\n",
			errs: []string{"dependencies.coupon.breaker.window: must hold buckets of at least 10ms"}},
		{name: "several problems on one line", content: "dependencies:\n  coupon:\n    timeout: -1s\n  logistics:\n    retry:\n      max_attempts: 11\n",
			errs: []string{"dependencies.coupon.timeout: must be positive, got -1s; dependencies.logistics.retry.max_attempts: must be 1..10, got 11"}},
		{name: "key set twice", content: "dependencies:\n  coupon:\n    timeout: 1s\n    timeout: 2s\n",
			errs: []string{"dependencies.coupon.timeout: set twice (first on line 3)"}},
		{name: "two documents", content: "dependencies: {}\n---\ndependencies: {}\n",
			errs: []string{"holds more than one YAML document"}},
		{name: "YAML syntax error", content: "dependencies:\n  coupon: [\n",
			errs: []string{"yaml:"}},
		{name: "cache_max_age on cache", content: "dependencies:\n  cache:\n    cache_max_age: 1m\n",
			errs: []string{"dependencies.cache.cache_max_age: does not apply to the cache itself"}},
		{name: "zero cache_max_age", content: "dependencies:\n  inventory:\n    cache_max_age: 0s\n",
			errs: []string{"dependencies.inventory.cache_max_age: must be positive"}},
		{name: "negative cache_max_age", content: "dependencies:\n  inventory:\n    cache_max_age: -1m\n",
			errs: []string{"dependencies.inventory.cache_max_age: must not be negative, got -1m"}},
	}
	dir := t.TempDir()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "deps"+string(rune('a'+i))+".yaml")
			writeFile(t, path, tc.content)
			got, err := config.LoadDependencies(path, def)
			if tc.errs != nil {
				if err == nil {
					t.Fatalf("LoadDependencies succeeded: %+v", got)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error is not one line: %q", err)
				}
				for _, w := range append(tc.errs, path) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q\ndoes not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadDependencies: %v", err)
			}
			want := config.DefaultDependencies()
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
	if !reflect.DeepEqual(def, config.DefaultDependencies()) {
		t.Error("LoadDependencies changed its base")
	}
}

func TestLoadDependenciesMissingFile(t *testing.T) {
	_, err := config.LoadDependencies(filepath.Join(t.TempDir(), "absent.yaml"), config.DefaultDependencies())
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadDependencies = %v, want os.ErrNotExist", err)
	}
}

func TestServeLoadDependenciesReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deps.yaml")
	writeFile(t, path, "dependencies:\n  coupon:\n    timeout: 200ms\n")
	s, err := config.ParseServe([]string{"--config", path})
	if err != nil {
		t.Fatalf("ParseServe: %v", err)
	}
	// The operator removes the key and sends SIGHUP: back to the default.
	writeFile(t, path, "dependencies: {}\n")
	deps, err := s.LoadDependencies()
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if !reflect.DeepEqual(deps, config.DefaultDependencies()) {
		t.Errorf("reload did not start from the defaults: coupon timeout %v", must(deps, "coupon").Timeout)
	}
	writeFile(t, path, "dependencies:\n  order:\n    timeout: 1500ms\n")
	if _, err := s.LoadDependencies(); err == nil || !strings.Contains(err.Error(), "dependencies.order.timeout: 1500ms must be shorter than --deadline") {
		t.Errorf("reload = %v, want the deadline rule", err)
	}
}

func TestPatchDependency(t *testing.T) {
	cur := must(config.DefaultDependencies(), "coupon")
	tests := []struct {
		name string
		body string
		want func(d *config.Dependency) // edits cur into the expected result
		errs []string
	}{
		{name: "timeout", body: `{"timeout":"250ms"}`,
			want: func(d *config.Dependency) { d.Timeout = 250 * time.Millisecond }},
		{name: "nested keys", body: `{"breaker":{"sleep_window":"10s","error_percent":30},"hedge":{"enabled":true}}`,
			want: func(d *config.Dependency) {
				d.Breaker.SleepWindow = 10 * time.Second
				d.Breaker.ErrorPercent = 30
				d.Hedge.Enabled = true
			}},
		{name: "pretty JSON with tabs", body: "{\n\t\"retry\": {\n\t\t\"max_attempts\": 1\n\t},\n\t\"cache_max_age\": \"2m\"\n}\n",
			want: func(d *config.Dependency) {
				d.Retry.MaxAttempts = 1
				d.CacheMaxAge = 2 * time.Minute
			}},
		{name: "YAML body", body: "bulkhead:\n  max_concurrent: 80\n",
			want: func(d *config.Dependency) { d.Bulkhead.MaxConcurrent = 80 }},
		{name: "empty object changes nothing", body: `{}`, want: func(*config.Dependency) {}},
		{name: "empty body", body: "", errs: []string{"empty body"}},
		{name: "blank body", body: " \n\t", errs: []string{"empty body"}},
		{name: "null", body: "null", errs: []string{"body must be an object", "got null"}},
		{name: "list", body: `[{"timeout":"1s"}]`, errs: []string{"body must be an object", "got a list"}},
		{name: "string", body: `"timeout"`, errs: []string{"body must be an object", `got "timeout"`}},
		{name: "malformed JSON", body: `{"timeout":`, errs: []string{"body: yaml:"}},
		{name: "unknown key", body: `{"timeout":"250ms","breaker":{"windw":"1s"}}`,
			errs: []string{"breaker.windw: unknown key (known: window,"}},
		{name: "unknown top key", body: `{"sub_budget":"250ms"}`, errs: []string{"sub_budget: unknown key (known: timeout, bulkhead, breaker, retry, hedge,", "cache_max_age)"}},
		{name: "invalid value", body: `{"timeout":"-5ms"}`, errs: []string{"timeout: must be positive, got -5ms"}},
		{name: "wrong type", body: `{"timeout":250}`, errs: []string{`timeout: must be a duration such as "300ms", got 250`}},
		{name: "zero that would become a generic default", body: `{"bulkhead":{"max_concurrent":0}}`,
			errs: []string{"bulkhead.max_concurrent: must not be 0", "leave the key out to keep 1024"}},
		{name: "null value", body: `{"timeout":null}`, errs: []string{"timeout: has no value"}},
		{name: "valid and invalid together", body: `{"timeout":"250ms","retry":{"max_attempts":20}}`,
			errs: []string{"retry.max_attempts: must be 1..10, got 20"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := cur
			got, err := config.PatchDependency(cur, []byte(tc.body))
			if cur != before {
				t.Fatal("PatchDependency changed cur")
			}
			if tc.errs != nil {
				if err == nil {
					t.Fatalf("PatchDependency succeeded: %+v", got)
				}
				if got != (config.Dependency{}) {
					t.Errorf("PatchDependency returned settings with its error: %+v", got)
				}
				if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "(line ") {
					t.Errorf("error should be one line without line numbers: %q", err)
				}
				for _, w := range tc.errs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q\ndoes not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("PatchDependency: %v", err)
			}
			want := cur
			tc.want(&want)
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDependenciesPatch(t *testing.T) {
	deadline := 1500 * time.Millisecond
	def := config.DefaultDependencies()
	tests := []struct {
		name, dep, body string
		errIs           error
		errs            []string
	}{
		{name: "ok", dep: "inventory", body: `{"timeout":"400ms"}`},
		{name: "unknown dependency", dep: "payment", body: `{"timeout":"400ms"}`, errIs: config.ErrUnknownDependency,
			errs: []string{`unknown dependency "payment"`}},
		{name: "bad body is named under the dependency", dep: "coupon", body: `{"timeout":"x"}`,
			errs: []string{`dependencies.coupon.timeout: must be a duration such as "300ms" or "auto", got "x"`}},
		{name: "timeout not under the deadline", dep: "order", body: `{"timeout":"2s"}`,
			errs: []string{"dependencies.order.timeout: 2s must be shorter than --deadline (ORDERAGG_DEADLINE) 1500ms"}},
		{name: "cache_max_age on cache", dep: "cache", body: `{"cache_max_age":"1m"}`,
			errs: []string{"dependencies.cache.cache_max_age: does not apply"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := def.Patch(tc.dep, []byte(tc.body), deadline)
			if !reflect.DeepEqual(def, config.DefaultDependencies()) {
				t.Fatal("Patch changed its receiver")
			}
			if tc.errs == nil {
				if err != nil {
					t.Fatalf("Patch: %v", err)
				}
				want := config.DefaultDependencies()
				want.Update("inventory", func(x *config.Dependency) { x.Timeout = 400 * time.Millisecond })
				if !reflect.DeepEqual(got, want) {
					t.Errorf("got %+v, want %+v", got, want)
				}
				return
			}
			if err == nil {
				t.Fatal("Patch succeeded")
			}
			if tc.errIs != nil && !errors.Is(err, tc.errIs) {
				t.Errorf("error %v does not match %v", err, tc.errIs)
			}
			if tc.errIs == nil && errors.Is(err, config.ErrUnknownDependency) {
				t.Errorf("body error %v matches ErrUnknownDependency (would be a 404)", err)
			}
			for _, w := range tc.errs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// TestSettingsRoundTrip checks that what the admin API shows (Settings, as
// JSON) is a valid PATCH body that reproduces the same settings.
func TestSettingsRoundTrip(t *testing.T) {
	d := config.DefaultDependencies()
	for _, name := range d.Names() {
		src, _ := d.Get(name)
		body, err := json.Marshal(src.Settings())
		if err != nil {
			t.Fatal(err)
		}
		got, err := config.PatchDependency(src, body)
		if err != nil {
			t.Fatalf("%s: PatchDependency(%s): %v", name, body, err)
		}
		if got != src {
			t.Errorf("%s: round trip gave %+v, want %+v", name, got, src)
		}
	}
	s := must(d, "order").Settings()
	if s["timeout"] != "1s" || s["cache_max_age"] != "24h" || s["bulkhead"].(map[string]any)["max_concurrent"] != 1024 {
		t.Errorf("Settings() = %v", s)
	}
}

const examplePath = "../../config.example.yaml"

// TestExampleFileEqualsDefaults keeps config.example.yaml honest: it is
// generated from the defaults and the reasons the registry and this package
// give for them (config.ExampleFile; go test ./internal/config -update
// rewrites it), and loaded over an empty base it gives exactly the built-in
// defaults, listing every key of every dependency with a comment.
func TestExampleFileEqualsDefaults(t *testing.T) {
	gen, err := config.ExampleFile()
	if err != nil {
		t.Fatalf("ExampleFile: %v", err)
	}
	if raw, _ := os.ReadFile(examplePath); string(raw) != gen {
		if flag.Lookup("update").Value.String() != "true" {
			t.Fatalf("%s is out of date; run go test ./internal/config -run TestExampleFileEqualsDefaults -update, then (cd deploy/kubernetes && go test -run TestConfigMap -update)", examplePath)
		}
		if err := os.WriteFile(examplePath, []byte(gen), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := config.LoadDependencies(examplePath, config.Dependencies{})
	if err != nil {
		t.Fatalf("LoadDependencies(example): %v", err)
	}
	if want := config.DefaultDependencies(); !reflect.DeepEqual(got, want) {
		for _, name := range want.Names() {
			g, _ := got.Get(name)
			w, _ := want.Get(name)
			if g != w {
				t.Errorf("example %s =\n%+v\nwant\n%+v", name, g, w)
			}
		}
	}

	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	collectKeys(t, root.Content[0], "", listed)
	var want []string
	def := config.DefaultDependencies()
	for _, name := range def.Names() {
		d, _ := def.Get(name)
		for _, k := range leafKeys(d.Settings(), "dependencies."+name) {
			if k != "dependencies.cache.cache_max_age" {
				want = append(want, k)
			}
		}
	}
	sort.Strings(want)
	var have []string
	for k := range listed {
		have = append(have, k)
	}
	sort.Strings(have)
	if !slices.Equal(have, want) {
		t.Errorf("example keys differ from the settings\nhave %v\nwant %v", have, want)
	}
}

// collectKeys records every leaf key path under n and checks it carries a
// comment saying why.
func collectKeys(t *testing.T, n *yaml.Node, path string, out map[string]bool) {
	t.Helper()
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := k.Value
		if path != "" {
			p = path + "." + k.Value
		}
		if v.Kind == yaml.MappingNode {
			collectKeys(t, v, p, out)
			continue
		}
		out[p] = true
		if k.LineComment == "" && v.LineComment == "" {
			t.Errorf("example: %s (line %d) has no comment saying why", p, k.Line)
		}
	}
}

func leafKeys(m map[string]any, prefix string) []string {
	var out []string
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			out = append(out, leafKeys(sub, prefix+"."+k)...)
			continue
		}
		out = append(out, prefix+"."+k)
	}
	return out
}

// TestZeroRuleFollowsResilienceDefaults checks the zero rule against the
// real resilience defaults: a field whose zero stays zero (max_queue,
// hedge.enabled) accepts it.
func TestZeroRuleFollowsResilienceDefaults(t *testing.T) {
	cur := must(config.DefaultDependencies(), "order")
	cur.Bulkhead.MaxQueue = 5
	cur.Hedge.Enabled = true
	got, err := config.PatchDependency(cur, []byte(`{"bulkhead":{"max_queue":0,"max_wait":"0s"},"hedge":{"enabled":false},"breaker":{"slow_call_duration":"0s"}}`))
	if err != nil {
		t.Fatalf("PatchDependency: %v", err)
	}
	if got.Bulkhead.MaxQueue != 0 || got.Hedge.Enabled {
		t.Errorf("zeros not applied: %+v", got)
	}
	if (resilience.Config{}).WithDefaults().Bulkhead.MaxQueue != 0 {
		t.Error("test assumption: resilience's max_queue default is 0")
	}
}

func TestFallbackTimeoutMustExceedCacheTimeout(t *testing.T) {
	d := config.DefaultDependencies()
	d.Update("cache", func(x *config.Dependency) { x.Timeout = 90 * time.Millisecond }) // longer than the 80ms fallback bounds
	err := d.Validate(1500 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "dependencies.inventory.fallback_timeout") {
		t.Fatalf("err %v", err)
	}
	if err := config.DefaultDependencies().Validate(1500 * time.Millisecond); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

// must returns the named dependency's settings, which the test knows exist.
func must(d config.Dependencies, name string) config.Dependency {
	dep, ok := d.Get(name)
	if !ok {
		panic("no dependency " + name)
	}
	return dep
}

// TestConfigMapEqualsDefaults holds the Kubernetes ConfigMap to the same
// standard as config.example.yaml: its config.yaml loads, over nothing, into
// exactly the registry's defaults. (deploy/kubernetes checks, in its own
// module, that it is config.example.yaml byte for byte.)
func TestConfigMapEqualsDefaults(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/kubernetes/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, path, cm.Data["config.yaml"])
	got, err := config.LoadDependencies(path, config.Dependencies{})
	if err != nil {
		t.Fatalf("the ConfigMap's config.yaml: %v", err)
	}
	if want := config.DefaultDependencies(); !reflect.DeepEqual(got, want) {
		t.Errorf("the ConfigMap's settings differ from the defaults:\n%+v\nwant\n%+v", got, want)
	}
}

// TestNoSecretInErrors: wherever a URL with a password comes in — a flag,
// its variable, the --config file, an admin PATCH body — the error that
// refuses it never shows the password.
func TestNoSecretInErrors(t *testing.T) {
	const pw = "hunter2-Sup3rPW"
	urls := []string{
		"redis://u:" + pw + "@127.0.0.1:notaport/0",
		"redis://u:" + pw + "%zz@cache:6379/0",
		"http://u:" + pw + "/x@host:9100",
		"redis://u:" + pw + "@cache:6379/0#frag",
		"redis://s1:26379?master_name=m&password=" + pw + "#frag",
		"ftp://u:" + pw + "@sim",
	}
	dir := t.TempDir()
	for i, u := range urls {
		for _, name := range []string{"redis-url", "order-url", "downstreams-url"} {
			if _, err := config.ParseServe([]string{"--" + name, u}); err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "--"+name) {
				t.Errorf("--%s %s: %v", name, u, err)
			}
			env := "ORDERAGG_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
			t.Run(env, func(t *testing.T) {
				t.Setenv(env, u)
				if _, err := config.ParseServe(nil); err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), env) {
					t.Errorf("%s=%s: %v", env, u, err)
				}
			})
		}
		// The file and the PATCH body have no URL settings; a URL pasted
		// into one by mistake is quoted back without its password.
		path := filepath.Join(dir, fmt.Sprintf("c%d.yaml", i))
		writeFile(t, path, "dependencies:\n  coupon:\n    timeout: "+strconv.Quote(u)+"\n")
		if _, err := config.LoadDependencies(path, config.DefaultDependencies()); err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "dependencies.coupon.timeout") {
			t.Errorf("file with %s: %v", u, err)
		}
		writeFile(t, path, strconv.Quote(u)+": 1\n")
		if _, err := config.LoadDependencies(path, config.DefaultDependencies()); err == nil || strings.Contains(err.Error(), pw) {
			t.Errorf("file with key %s: %v", u, err)
		}
		for _, body := range []string{`{"timeout":` + strconv.Quote(u) + `}`, `{"breaker":` + strconv.Quote(u) + `}`, strconv.Quote(u), u} {
			if _, err := config.DefaultDependencies().Patch("coupon", []byte(body), 1500*time.Millisecond); err == nil || strings.Contains(err.Error(), pw) {
				t.Errorf("PATCH %s: %v", body, err)
			}
		}
	}
}
