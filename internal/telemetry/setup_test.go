package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// otelEnv lists the variables Setup, autoexport, the exporters and the
// resource detector read, so a test starts from none of them set whatever
// the process environment holds.
var otelEnv = []string{
	"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_INSECURE",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_BSP_SCHEDULE_DELAY", "OTEL_TRACES_SAMPLER",
}

func clearOTelEnv(t testing.TB) {
	t.Helper()
	for _, k := range otelEnv {
		t.Setenv(k, "")
	}
}

func setEnv(t testing.TB, kv ...string) {
	t.Helper()
	clearOTelEnv(t)
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

func TestSetupRejectsWhatItCannotHonour(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"unknown exporter", []string{"OTEL_TRACES_EXPORTER", "jaeger"}, "OTEL_TRACES_EXPORTER"},
		{"unknown protocol", []string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL=\"http/json\""},
		{"unknown traces protocol", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\"thrift\""},
		{"resource attribute without value", []string{"OTEL_RESOURCE_ATTRIBUTES", "team=orders,oops"}, "OTEL_RESOURCE_ATTRIBUTES"},
	} {
		t.Run(c.name, func(t *testing.T) {
			setEnv(t, c.env...)
			tel, err := Setup(context.Background(), Config{})
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

// TestExporterChoice: traces are on with an exporter named or an OTLP
// endpoint set, and off otherwise.
func TestExporterChoice(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want bool
	}{
		{nil, false},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1"}, true},
		{[]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/v1/traces"}, true},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER", "none"}, false},
		{[]string{"OTEL_TRACES_EXPORTER", "console"}, true},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}, true},
		{[]string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, true},
	} {
		t.Run(strings.Join(c.env, " "), func(t *testing.T) {
			setEnv(t, c.env...)
			tel, err := Setup(context.Background(), Config{})
			if err != nil {
				t.Fatal(err)
			}
			if _, got := tel.TracerProvider().(*sdktrace.TracerProvider); got != c.want {
				t.Errorf("traces on %v, want %v", got, c.want)
			}
			if err := tel.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
}

// consoleChild marks the run of this test binary that TestConsoleExporter
// starts: autoexport's console exporter writes to the process's own standard
// output, so the test reads a child's.
const consoleChild = "ORDERAGG_TELEMETRY_CONSOLE_CHILD"

// TestConsoleExporter: finished spans reach standard output as JSON objects
// carrying the resource from the environment, and Shutdown flushes them.
func TestConsoleExporter(t *testing.T) {
	if os.Getenv(consoleChild) == "1" {
		tel, err := Setup(context.Background(), Config{ServiceVersion: "1.2.3"})
		if err != nil {
			t.Fatal(err)
		}
		_, sp := tel.TracerProvider().Tracer("test").Start(context.Background(), "console-span")
		sp.End()
		if err := tel.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return
	}
	setEnv(t, consoleChild, "1",
		"OTEL_TRACES_EXPORTER", "console",
		"OTEL_SERVICE_NAME", "orderagg-canary",
		"OTEL_RESOURCE_ATTRIBUTES", "service.name=ignored,deployment.environment=staging%20eu")
	cmd := exec.Command(os.Args[0], "-test.run=^TestConsoleExporter$", "-test.count=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, out.String(), errOut.String())
	}

	// The child's stdout also has the test runner's own lines: find the span.
	var span struct {
		Name     string
		Resource []struct {
			Key   string
			Value struct{ Value any }
		}
	}
	found := false
	for line := range strings.Lines(out.String()) {
		if strings.HasPrefix(line, "{") {
			if err := json.Unmarshal([]byte(line), &span); err != nil {
				t.Fatalf("span line is not JSON: %v\n%s", err, line)
			}
			found = true
			break
		}
	}
	if !found || span.Name != "console-span" {
		t.Fatalf("no console-span on stdout:\n%s", out.String())
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
		env  []string
		want string
	}{
		{nil, "orderagg"},
		{[]string{"OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs"}, "from-attrs"},
		{[]string{"OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs", "OTEL_SERVICE_NAME", "from-name"}, "from-name"},
	} {
		setEnv(t, c.env...)
		tel, err := Setup(context.Background(), Config{})
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, lp := range scrape(t, tel)["target_info"].GetMetric()[0].GetLabel() {
			if lp.GetName() == "service_name" {
				got = lp.GetValue()
			}
		}
		if got != c.want {
			t.Errorf("%v: service.name = %q, want %q", c.env, got, c.want)
		}
		_ = tel.Shutdown(context.Background())
	}
}

// receiver is an in-process OTLP trace receiver: a gRPC TraceService and an
// HTTP /v1/traces handler feeding one list of what arrived.
type receiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []string // "service.name/span name"
}

func (r *receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, svc+"/"+s.GetName())
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var msg coltracepb.ExportTraceServiceRequest
	if err == nil && req.URL.Path == "/v1/traces" && req.Header.Get("Content-Type") == "application/x-protobuf" {
		err = proto.Unmarshal(body, &msg)
	} else if err == nil {
		err = errors.New("not an OTLP/HTTP protobuf trace export")
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, _ = r.Export(req.Context(), &msg)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *receiver) received() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// TestOTLPProtocols: with only an endpoint and a protocol set, spans reach
// an OTLP receiver over gRPC and over HTTP/protobuf, with the default
// service name.
func TestOTLPProtocols(t *testing.T) {
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(protocol, func(t *testing.T) {
			rcv := &receiver{}
			var endpoint string
			if protocol == "grpc" {
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				srv := grpc.NewServer()
				coltracepb.RegisterTraceServiceServer(srv, rcv)
				served := make(chan error, 1)
				go func() { served <- srv.Serve(lis) }()
				t.Cleanup(func() { srv.Stop(); <-served })
				endpoint = "http://" + lis.Addr().String()
			} else {
				srv := httptest.NewServer(rcv)
				t.Cleanup(srv.Close)
				endpoint = srv.URL
			}
			setEnv(t, "OTEL_EXPORTER_OTLP_ENDPOINT", endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL", protocol,
				"OTEL_EXPORTER_OTLP_INSECURE", "true")

			tel, err := Setup(context.Background(), Config{})
			if err != nil {
				t.Fatal(err)
			}
			_, sp := tel.TracerProvider().Tracer("test").Start(context.Background(), "over-"+protocol)
			sp.End()
			if err := tel.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got, want := rcv.received(), []string{"orderagg/over-" + protocol}; !slices.Equal(got, want) {
				t.Errorf("receiver got %q, want %q", got, want)
			}
		})
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
	setEnv(t, "OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL, "OTEL_BSP_SCHEDULE_DELAY", "3600000")

	tel, err := Setup(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
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

// TestOTelErrorsRateLimited: OpenTelemetry's own errors (an unreachable
// collector) are logged at most once per interval.
func TestOTelErrorsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs lockedBuffer
		tel, err := Setup(context.Background(), Config{Logger: slogJSON(&logs)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
		for range 3 {
			otel.Handle(errors.New("export failed"))
		}
		time.Sleep(time.Second)
		otel.Handle(errors.New("export failed again"))
		lines := logs.jsonLines(t)
		if len(lines) != 2 || lines[0]["error"] != "export failed" || lines[1]["error"] != "export failed again" {
			t.Errorf("lines %v", lines)
		}
	})
}
