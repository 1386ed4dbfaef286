package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestSetupRejectsWhatItCannotHonour(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"unknown exporter", []string{"OTEL_TRACES_EXPORTER", "jaeger"}, "OTEL_TRACES_EXPORTER"},
		{"grpc protocol", []string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"grpc traces protocol", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{"resource attribute without value", []string{"OTEL_RESOURCE_ATTRIBUTES", "team=orders,oops"}, "OTEL_RESOURCE_ATTRIBUTES"},
		{"resource attribute badly escaped", []string{"OTEL_RESOURCE_ATTRIBUTES", "team=%zz"}, "OTEL_RESOURCE_ATTRIBUTES"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tel, err := Setup(context.Background(), Config{Getenv: env(c.env...)})
			if err == nil {
				_ = tel.Shutdown(context.Background())
				t.Fatal("Setup succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not name %s", err, c.want)
			}
		})
	}
}

func TestExporterChoice(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{nil, ExporterNone},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1"}, ExporterOTLP},
		{[]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/v1/traces"}, ExporterOTLP},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER", "none"}, ExporterNone},
		{[]string{"OTEL_TRACES_EXPORTER", " Console "}, ExporterConsole},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}, ExporterOTLP},
	} {
		tel, err := Setup(context.Background(), Config{Getenv: env(c.env...), Stdout: io.Discard})
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if got := tel.Exporter(); got != c.want {
			t.Errorf("%v: exporter %q, want %q", c.env, got, c.want)
		}
		if got := tel.tracing; got != (c.want != ExporterNone) {
			t.Errorf("%v: tracing %v", c.env, got)
		}
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Errorf("%v: Shutdown: %v", c.env, err)
		}
	}
}

// TestConsoleExporter: finished spans reach standard output as JSON objects
// carrying the resource from the environment, and Shutdown flushes them.
func TestConsoleExporter(t *testing.T) {
	var out lockedBuffer
	tel, err := Setup(context.Background(), Config{
		ServiceVersion: "1.2.3",
		Stdout:         &out,
		Getenv: env("OTEL_TRACES_EXPORTER", "console",
			"OTEL_SERVICE_NAME", "orderagg-canary",
			"OTEL_RESOURCE_ATTRIBUTES", "service.name=ignored,deployment.environment=staging%20eu"),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, sp := tel.TracerProvider().Tracer("test").Start(context.Background(), "console-span")
	sp.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}

	dec := json.NewDecoder(strings.NewReader(out.String()))
	var span struct {
		Name     string
		Resource []struct {
			Key   string
			Value struct{ Value any }
		}
	}
	if err := dec.Decode(&span); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out.String())
	}
	if span.Name != "console-span" {
		t.Errorf("span name %q", span.Name)
	}
	res := map[string]any{}
	for _, kv := range span.Resource {
		res[kv.Key] = kv.Value.Value
	}
	want := map[string]any{"service.name": "orderagg-canary", "service.version": "1.2.3", "deployment.environment": "staging eu"}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("resource %s = %v, want %v (resource %v)", k, res[k], v, res)
		}
	}
}

func TestServiceNameDefault(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Getenv: env()}, "orderagg"},
		{Config{ServiceName: "agg", Getenv: env()}, "agg"},
		{Config{ServiceName: "agg", Getenv: env("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs")}, "from-attrs"},
	} {
		res, err := newResource(context.Background(), c.cfg.withDefaults())
		if err != nil {
			t.Fatal(err)
		}
		v, _ := res.Set().Value("service.name")
		if v.AsString() != c.want {
			t.Errorf("service.name = %q, want %q", v.AsString(), c.want)
		}
	}
}

// collector is a fake OTLP/HTTP endpoint.
type collector struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.mu.Unlock()
	}
	w.Header().Set("Connection", "close")
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func (c *collector) received() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bodies
}

// TestOTLPShutdownFlushes: with a batch delay far longer than the test, a
// span reaches the collector only because Shutdown flushes it.
func TestOTLPShutdownFlushes(t *testing.T) {
	col := &collector{}
	srv := httptest.NewServer(col)
	t.Cleanup(srv.Close)
	// The OTLP exporter reads its settings from the process environment.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")

	tel, err := Setup(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Exporter() != ExporterOTLP {
		t.Fatalf("exporter %q, want otlp", tel.Exporter())
	}
	_, sp := tel.TracerProvider().Tracer("test").Start(context.Background(), "flushed-at-shutdown")
	sp.End()
	if n := len(col.received()); n != 0 {
		t.Fatalf("collector got %d exports before Shutdown; the test cannot tell a flush", n)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := col.received()
	if len(got) != 1 || !bytes.Contains(got[0], []byte("flushed-at-shutdown")) {
		t.Fatalf("collector got %d exports, want one holding the span", len(got))
	}
}

func TestOTelErrorsRateLimited(t *testing.T) {
	var logs lockedBuffer
	clk := newFakeNow()
	h := newErrorLogger(Config{Logger: slogJSON(&logs), Now: clk.Now, LogInterval: 10}.withDefaults())
	for range 3 {
		h.Handle(errors.New("export failed"))
	}
	clk.Advance(10)
	h.Handle(errors.New("export failed again"))
	lines := logs.jsonLines(t)
	if len(lines) != 2 || lines[0]["error"] != "export failed" || lines[1]["suppressed"] != 2.0 {
		t.Errorf("lines %v", lines)
	}
}
