package app

// The OpenAPI contract test: api/openapi.yaml is loaded with kin-openapi and
// the real service's answers — healthy, degraded, cached, 404, 503, 400, the
// operational endpoints and the admin API — are validated against it, so the
// file and the code cannot drift apart unnoticed. The file's own examples are
// validated against their schemas, and the schemas are shown to reject the
// pages the contract forbids (a fabricated stock of 0, a cached section
// without as_of, …) so they cannot silently become vacuous.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/labstack/echo/v4"

	"github.com/orderagg/orderagg/internal/admission"
	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/handlers"
)

const specFile = "../../api/openapi.yaml"

// The dashboard is HTML, which kin-openapi does not decode by default: read
// it as text, so its status, headers and media type are still checked.
func init() { openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder) }

// apiSpec is the loaded contract and a router over its paths.
type apiSpec struct {
	doc    *openapi3.T
	router routers.Router
}

func loadSpec(t *testing.T) *apiSpec {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specFile)
	if err != nil {
		t.Fatalf("loading %s: %v", specFile, err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("%s is OpenAPI %s; its schemas rely on 3.1 (JSON Schema 2020-12)", specFile, doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableExamplesValidation(), openapi3.EnableMultiError()); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", specFile, err)
	}
	// Route on paths alone: the servers name the default addresses, the
	// tests listen on free ports.
	routed := *doc
	routed.Servers = nil
	router, err := legacy.NewRouter(&routed)
	if err != nil {
		t.Fatal(err)
	}
	return &apiSpec{doc: doc, router: router}
}

// reply is one real answer, kept raw for validation.
type reply struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any // the JSON object, when the answer is one
}

func (r reply) section(name string) map[string]any {
	m, _ := r.body[name].(map[string]any)
	return m
}

func (r reply) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// send makes one request without failing the test, so it may run on any
// goroutine.
func send(method, url, body string, header map[string]string) (reply, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			return reply{}, fmt.Errorf("%s %s: invalid JSON %q: %w", method, url, raw, err)
		}
	}
	return r, nil
}

// exchange sends a request and checks its answer has status want and
// matches the contract (status, headers, body).
func (sp *apiSpec) exchange(t *testing.T, want int, method, url, body string, header map[string]string) reply {
	t.Helper()
	r, err := send(method, url, body, header)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, url, r.status, want, r.raw)
	}
	if err := sp.validateResponse(method, url, body, header, r); err != nil {
		t.Fatalf("%s %s: the %d answer does not match %s:\n%v\nbody: %s", method, url, r.status, specFile, err, r.raw)
	}
	return r
}

func (sp *apiSpec) route(method, url, body string, header map[string]string) (*openapi3filter.RequestValidationInput, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	route, params, err := sp.router.FindRoute(req)
	if err != nil {
		return nil, fmt.Errorf("no operation in the spec for %s %s: %w", method, req.URL.Path, err)
	}
	return &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearerPresent, MultiError: true},
	}, nil
}

func (sp *apiSpec) validateResponse(method, url, body string, header map[string]string, r reply) error {
	in, err := sp.route(method, url, body, header)
	if err != nil {
		return err
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 r.status,
		Header:                 r.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(r.raw)
	return openapi3filter.ValidateResponse(context.Background(), out)
}

// validateRequest says whether the spec accepts a request, so the test can
// show that the spec's request rules (id pattern, PATCH body schema) agree
// with what the code accepts.
func (sp *apiSpec) validateRequest(method, url, body string, header map[string]string) error {
	in, err := sp.route(method, url, body, header)
	if err != nil {
		return err
	}
	return openapi3filter.ValidateRequest(context.Background(), in)
}

// bearerPresent is the spec's adminBearer scheme seen from outside: a bearer
// credential must be sent (its value is the server's to judge).
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecurityScheme == nil || in.SecurityScheme.Type != "http" || !strings.EqualFold(in.SecurityScheme.Scheme, "bearer") {
		return fmt.Errorf("unexpected security scheme %q", in.SecuritySchemeName)
	}
	if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
		return errors.New("no bearer token")
	}
	return nil
}

// TestOpenAPIDocument checks the file on its own: valid OpenAPI 3.1, every
// example valid against its schema, the named examples present, the schemas
// strict enough to reject what the contract forbids, and one operation per
// route the code registers.
func TestOpenAPIDocument(t *testing.T) {
	sp := loadSpec(t)

	t.Run("examples match their schemas", func(t *testing.T) {
		n := 0
		for path, item := range sp.doc.Paths.Map() {
			for method, op := range item.Operations() {
				check := func(where string, content openapi3.Content, asResponse bool) {
					for mime, mt := range content {
						if mt.Schema == nil {
							continue
						}
						vals := map[string]any{}
						if mt.Example != nil {
							vals["example"] = mt.Example
						}
						for name, ex := range mt.Examples {
							vals[name] = ex.Value.Value
						}
						for name, v := range vals {
							n++
							opts := []openapi3.SchemaValidationOption{openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()}
							if asResponse {
								opts = append(opts, openapi3.VisitAsResponse())
							} else {
								opts = append(opts, openapi3.VisitAsRequest())
							}
							if err := mt.Schema.Value.VisitJSON(v, opts...); err != nil {
								t.Errorf("%s %s %s %s example %q: %v", method, path, where, mime, name, err)
							}
						}
					}
				}
				if op.RequestBody != nil {
					check("request", op.RequestBody.Value.Content, false)
				}
				for code, resp := range op.Responses.Map() {
					check(code, resp.Value.Content, true)
				}
			}
		}
		if n < 10 {
			t.Fatalf("only %d examples checked", n)
		}
	})

	t.Run("named examples of the page", func(t *testing.T) {
		op := sp.doc.Paths.Value("/v1/orders/{id}").Get
		want := map[string][]string{
			"200": {"healthy", "degraded"}, "400": {"invalidOrderId"}, "404": {"orderNotFound"},
			"503": {"orderUnavailable", "overloaded"},
		}
		for code, names := range want {
			mt := op.Responses.Value(code).Value.Content.Get("application/json")
			for _, name := range names {
				if mt == nil || mt.Examples[name] == nil {
					t.Errorf("%s answer lacks the %q example", code, name)
				}
			}
		}
		degraded := op.Responses.Value("200").Value.Content.Get("application/json").Examples["degraded"].Value.Value.(map[string]any)
		sources := map[any]int{}
		for _, name := range []string{"order", "inventory", "coupons", "logistics"} {
			sources[degraded[name].(map[string]any)["source"]]++
		}
		if sources["cache"] < 1 || sources["fallback"] < 1 {
			t.Fatalf("the degraded example should show a cached and a fallback section: %v", sources)
		}
	})

	t.Run("the page schema rejects what the contract forbids", func(t *testing.T) {
		page := sp.doc.Components.Schemas["OrderDetail"].Value
		healthy := sp.doc.Components.Examples["HealthyPage"].Value.Value
		degraded := sp.doc.Components.Examples["DegradedPage"].Value.Value
		valid := func(v any) error {
			return page.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse())
		}
		for name, v := range map[string]any{"healthy": healthy, "degraded": degraded} {
			if err := valid(v); err != nil {
				t.Fatalf("%s example: %v", name, err)
			}
		}
		bad := []struct {
			name string
			base any
			edit func(p map[string]any)
		}{
			{"fallback stock of 0", degraded, func(p map[string]any) {
				firstItem(p, "inventory")["available"] = 0.0
			}},
			{"fallback OUT_OF_STOCK", degraded, func(p map[string]any) {
				firstItem(p, "inventory")["status"] = "OUT_OF_STOCK"
			}},
			{"live stock unknown", healthy, func(p map[string]any) {
				firstItem(p, "inventory")["available"] = nil
			}},
			{"cached section without as_of", degraded, func(p map[string]any) {
				delete(sect(p, "logistics"), "as_of")
			}},
			{"cached section without reason", degraded, func(p map[string]any) {
				delete(sect(p, "logistics"), "reason")
			}},
			{"live section with a reason", healthy, func(p map[string]any) {
				sect(p, "coupons")["reason"] = "TIMEOUT"
			}},
			{"live section marked degraded", healthy, func(p map[string]any) {
				sect(p, "coupons")["degraded"] = true
			}},
			{"unknown reason", degraded, func(p map[string]any) {
				sect(p, "inventory")["reason"] = "BROKEN"
			}},
			{"page not degraded with a degraded section", degraded, func(p map[string]any) {
				p["degraded"] = false
			}},
			{"page degraded with every section live", healthy, func(p map[string]any) {
				p["degraded"] = true
			}},
			{"order from the fallback", healthy, func(p map[string]any) {
				o := sect(p, "order")
				o["source"], o["degraded"], o["reason"] = "fallback", true, "FAILURE"
				p["degraded"] = true
			}},
			{"fallback coupons not empty", degraded, func(p map[string]any) {
				c := sect(p, "coupons")
				c["source"], c["degraded"], c["reason"] = "fallback", true, "FAILURE"
				c["items"] = []any{map[string]any{"code": "X", "description": "", "discount_cents": 1.0, "expires_at": "2026-01-01T00:00:00Z"}}
			}},
			{"fallback logistics with a carrier", degraded, func(p map[string]any) {
				l := sect(p, "logistics")
				delete(l, "as_of")
				l["source"], l["status"] = "fallback", "UNKNOWN"
			}},
			{"an unknown field in a section", healthy, func(p map[string]any) {
				sect(p, "logistics")["surprise"] = 1.0
			}},
			{"an unknown top-level field", healthy, func(p map[string]any) {
				p["surprise"] = 1.0
			}},
			{"a missing section", healthy, func(p map[string]any) {
				delete(p, "coupons")
			}},
		}
		for _, tc := range bad {
			p := deepCopy(t, tc.base)
			tc.edit(p)
			if err := valid(p); err == nil {
				t.Errorf("%s: accepted by the OrderDetail schema", tc.name)
			}
		}
	})

	t.Run("one operation per route of the code", func(t *testing.T) {
		logger := slog.New(slog.DiscardHandler)
		public := handlers.New(handlers.Options{
			Deadline: time.Second, Limiter: admission.New(1), Logger: logger,
			Report:    func() handlers.ResilienceReport { return handlers.ResilienceReport{} },
			Metrics:   http.NotFoundHandler(),
			Dashboard: http.NotFoundHandler(),
		})
		admin := handlers.NewAdmin(nil, "t", nil, logger)
		code := map[string]bool{}
		heads := map[string]bool{}
		for _, e := range []*echo.Echo{public, admin} {
			for _, r := range e.Routes() {
				path := echoPathToOpenAPI(r.Path)
				// /dashboard is mounted for every method and has sub-routes
				// (its event stream, demo fault controls); the contract
				// documents its page.
				if strings.Contains(path, "*") || path == "/dashboard" && r.Method != http.MethodGet {
					continue
				}
				// HEAD mirrors GET on every GET route (the file says so
				// once, in its description), so it is checked here, not
				// listed there.
				if r.Method == http.MethodHead {
					heads[path] = true
					continue
				}
				code[r.Method+" "+path] = true
			}
		}
		for k := range code {
			if path, ok := strings.CutPrefix(k, "GET "); ok && path != "/dashboard" && !heads[path] {
				t.Errorf("the code serves GET %s without HEAD", path)
			}
		}
		for path := range heads {
			if !code["GET "+path] {
				t.Errorf("the code serves HEAD %s without GET", path)
			}
		}
		spec := map[string]bool{}
		for path, item := range sp.doc.Paths.Map() {
			for method := range item.Operations() {
				spec[method+" "+path] = true
			}
		}
		for k := range code {
			if !spec[k] {
				t.Errorf("the code serves %s, which %s does not describe", k, specFile)
			}
		}
		for k := range spec {
			if !code[k] {
				t.Errorf("%s describes %s, which the code does not serve", specFile, k)
			}
		}
	})
}

func echoPathToOpenAPI(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

func sect(p map[string]any, name string) map[string]any { return p[name].(map[string]any) }

func firstItem(p map[string]any, name string) map[string]any {
	return sect(p, name)["items"].([]any)[0].(map[string]any)
}

func deepCopy(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOpenAPIRealAnswers validates the real service's answers against the
// contract, one scenario after another on one in-process service.
func TestOpenAPIRealAnswers(t *testing.T) {
	sp := loadSpec(t)
	// Default budgets: a section the test expects live must get what a
	// cold, loaded process needs, and the hangs cost their dependency's
	// default sub-budget (at most the order's second).
	s, _ := startService(t, []string{"--admin-addr", "127.0.0.1:0", "--admin-token", "t-admin-token-16b"}, patientCache)
	s.getLive("/v1/orders/o-1") // a warm process: connections to the downstreams are open
	api := "http://" + s.addrs.API
	sim := "http://" + s.addrs.Sim
	adminURL := "http://" + s.addrs.Admin
	fault := func(t *testing.T, svc, body string) {
		t.Helper()
		if r, err := send(http.MethodPut, sim+"/faults/"+svc, body, nil); err != nil || r.status != http.StatusOK {
			t.Fatalf("fault %s %s: %v %d %s", svc, body, err, r.status, r.raw)
		}
	}
	healthy := func(t *testing.T) {
		t.Helper()
		if r, err := send(http.MethodDelete, sim+"/faults", "", nil); err != nil || r.status != http.StatusOK {
			t.Fatalf("clearing faults: %v %d", err, r.status)
		}
	}
	page := func(t *testing.T, id string) reply {
		t.Helper()
		r := sp.exchange(t, http.StatusOK, http.MethodGet, api+"/v1/orders/"+id, "", nil)
		// What the schema cannot say: the header follows the body.
		if cc := r.header.Get("Cache-Control"); (r.body["degraded"] == true) != (cc == "no-store") {
			t.Fatalf("degraded %v with Cache-Control %q", r.body["degraded"], cc)
		}
		return r
	}
	wantSection := func(t *testing.T, r reply, name, source, reason string) {
		t.Helper()
		got := r.section(name)
		if got["source"] != source || (reason != "" && got["reason"] != reason) {
			t.Fatalf("%s: got %v, want source %s reason %q", name, got, source, reason)
		}
	}

	t.Run("healthy page", func(t *testing.T) {
		healthy(t)
		r := sp.exchange(t, http.StatusOK, http.MethodGet, api+"/v1/orders/o-1001", "", map[string]string{"X-Request-Id": "req-openapi"})
		if r.header.Get("X-Request-Id") != "req-openapi" {
			t.Fatalf("X-Request-Id %q", r.header.Get("X-Request-Id"))
		}
		if r.body["degraded"] != false || r.header.Get("Cache-Control") != "" {
			t.Fatalf("degraded %v, Cache-Control %q", r.body["degraded"], r.header.Get("Cache-Control"))
		}
		for _, name := range []string{"order", "inventory", "coupons", "logistics"} {
			wantSection(t, r, name, "live", "")
		}
	})

	t.Run("degraded page, every section on its fallback", func(t *testing.T) {
		healthy(t)
		fault(t, "inventory", `{"error_rate":1}`)
		fault(t, "coupon", `{"hang":true}`)
		fault(t, "logistics", `{"corrupt":true}`)
		r := page(t, "o-4242") // never seen: no last-good answer
		wantSection(t, r, "order", "live", "")
		wantSection(t, r, "inventory", "fallback", "FAILURE")
		wantSection(t, r, "coupons", "fallback", "TIMEOUT")
		wantSection(t, r, "logistics", "fallback", "FAILURE")
	})

	t.Run("degraded page, cached sections", func(t *testing.T) {
		healthy(t)
		fault(t, "inventory", `{"error_rate":1}`)
		page(t, "o-5") // warms order, coupons and logistics; inventory has no copy
		fault(t, "order", `{"error_rate":1}`)
		fault(t, "logistics", `{"hang":true}`)
		// The last-good writes are asynchronous: wait (bounded) for them.
		var r reply
		waitUntil(t, func() bool {
			r = page(t, "o-5")
			return r.section("order")["source"] == "cache" && r.section("logistics")["source"] == "cache"
		})
		wantSection(t, r, "order", "cache", "FAILURE")
		wantSection(t, r, "inventory", "fallback", "FAILURE")
		wantSection(t, r, "coupons", "live", "")
		wantSection(t, r, "logistics", "cache", "TIMEOUT")
	})

	t.Run("404", func(t *testing.T) {
		healthy(t)
		r := sp.exchange(t, http.StatusNotFound, http.MethodGet, api+"/v1/orders/nf-404", "", nil)
		if r.code() != handlers.CodeOrderNotFound {
			t.Fatalf("code %q", r.code())
		}
	})

	t.Run("503", func(t *testing.T) {
		healthy(t)
		fault(t, "order", `{"hang":true}`)
		r := sp.exchange(t, http.StatusServiceUnavailable, http.MethodGet, api+"/v1/orders/o-503", "", nil)
		if r.code() != handlers.CodeOrderUnavailable {
			t.Fatalf("code %q", r.code())
		}
	})

	t.Run("400", func(t *testing.T) {
		healthy(t)
		for _, id := range []string{"has%20space", strings.Repeat("a", 65), "semi;colon", "uni%C3%A9"} {
			url := api + "/v1/orders/" + id
			r := sp.exchange(t, http.StatusBadRequest, http.MethodGet, url, "", nil)
			if r.code() != handlers.CodeInvalidOrderID {
				t.Fatalf("%s: code %q", id, r.code())
			}
			// The spec's id rule is the code's.
			if err := sp.validateRequest(http.MethodGet, url, "", nil); err == nil {
				t.Errorf("the spec accepts the id %q that the service refuses", id)
			}
		}
		for _, id := range []string{"o-1001", "A_b-9", strings.Repeat("z", 64)} {
			if err := sp.validateRequest(http.MethodGet, api+"/v1/orders/"+id, "", nil); err != nil {
				t.Errorf("the spec refuses the valid id %q: %v", id, err)
			}
		}
	})

	t.Run("414", func(t *testing.T) {
		sp.exchange(t, http.StatusRequestURITooLong, http.MethodGet, api+"/v1/orders/"+strings.Repeat("a", 9000), "", nil)
	})

	t.Run("operations", func(t *testing.T) {
		healthy(t)
		sp.exchange(t, http.StatusOK, http.MethodGet, api+"/healthz", "", nil)
		sp.exchange(t, http.StatusOK, http.MethodGet, api+"/readyz", "", nil)
		r := sp.exchange(t, http.StatusOK, http.MethodGet, api+"/v1/resilience", "", nil)
		var names []string
		for _, d := range r.body["dependencies"].([]any) {
			names = append(names, d.(map[string]any)["name"].(string))
		}
		if !slices.Equal(names, append(downstream.Names(), config.NameCache)) {
			t.Fatalf("dependencies %v", names)
		}
	})

	t.Run("metrics and dashboard", func(t *testing.T) {
		r := sp.exchange(t, http.StatusOK, http.MethodGet, api+"/metrics", "", nil)
		if !bytes.Contains(r.raw, []byte("orderagg_dependency_events_total")) {
			t.Errorf("/metrics lacks the events counter:\n%.2000s", r.raw)
		}
		sp.exchange(t, http.StatusOK, http.MethodGet, api+"/dashboard", "", nil)
	})

	bearer := map[string]string{"Authorization": "Bearer t-admin-token-16b", "Content-Type": "application/json"}

	t.Run("breaker forced open shows in the page and the snapshot", func(t *testing.T) {
		healthy(t)
		url := adminURL + "/admin/dependencies/coupon/breaker"
		body := `{"force":"open"}`
		if err := sp.validateRequest(http.MethodPost, url, body, bearer); err != nil {
			t.Fatalf("the spec refuses a valid request: %v", err)
		}
		sp.exchange(t, http.StatusOK, http.MethodPost, url, body, bearer)
		defer sp.exchange(t, http.StatusOK, http.MethodPost, url, `{"force":"none"}`, bearer)
		wantSection(t, page(t, "o-77"), "coupons", "fallback", "SHORT_CIRCUITED")
		r := sp.exchange(t, http.StatusOK, http.MethodGet, api+"/v1/resilience", "", nil)
		if got := r.body["dependencies"].([]any)[2].(map[string]any)["breaker"]; got != "FORCED_OPEN" {
			t.Fatalf("coupon breaker %v", got)
		}
	})

	t.Run("admin", func(t *testing.T) {
		list := adminURL + "/admin/dependencies"
		patch := adminURL + "/admin/dependencies/coupon"
		force := adminURL + "/admin/dependencies/logistics/breaker"

		sp.exchange(t, http.StatusOK, http.MethodGet, list, "", bearer)
		for _, h := range []map[string]string{nil, {"Authorization": "Bearer wrong"}, {"Authorization": "t-admin-token-16b"}} {
			sp.exchange(t, http.StatusUnauthorized, http.MethodGet, list, "", h)
			sp.exchange(t, http.StatusUnauthorized, http.MethodPatch, patch, `{"timeout":"250ms"}`, h)
			sp.exchange(t, http.StatusUnauthorized, http.MethodPost, force, `{"force":"open"}`, h)
		}

		good := `{"timeout":"250ms","breaker":{"sleep_window":"7s"},"cache_max_age":"2m"}`
		if err := sp.validateRequest(http.MethodPatch, patch, good, bearer); err != nil {
			t.Fatalf("the spec refuses a valid PATCH: %v", err)
		}
		r := sp.exchange(t, http.StatusOK, http.MethodPatch, patch, good, bearer)
		if s := r.body["settings"].(map[string]any); s["timeout"] != "250ms" || s["cache_max_age"] != "2m" {
			t.Fatalf("settings %v", s)
		}

		// timeout: auto and back, each shown at once in /v1/resilience.
		coupon := func() map[string]any {
			r := sp.exchange(t, http.StatusOK, http.MethodGet, api+"/v1/resilience", "", nil)
			return r.body["dependencies"].([]any)[2].(map[string]any)
		}
		// A timeout_max under the calls' end, the deadline minus the
		// reserve (one at or past it is refused: TestTimeoutsTheBreakerCanSee).
		ceiling := 900 * time.Millisecond
		asked := fmt.Sprintf("%dms", ceiling.Milliseconds())
		auto := fmt.Sprintf(`{"timeout":"auto","timeout_max":%q}`, asked)
		if err := sp.validateRequest(http.MethodPatch, patch, auto, bearer); err != nil {
			t.Fatalf("the spec refuses timeout auto: %v", err)
		}
		r = sp.exchange(t, http.StatusOK, http.MethodPatch, patch, auto, bearer)
		if s := r.body["settings"].(map[string]any); s["timeout"] != "auto" || s["timeout_max"] != asked {
			t.Fatalf("settings after auto %v, want timeout_max %v", s, asked)
		}
		if c := coupon(); c["timeout_mode"] != "auto" || c["timeout_ms"] != 250.0 || c["timeout_max_ms"] != float64(ceiling.Milliseconds()) {
			t.Fatalf("/v1/resilience after auto: %v %v max %v", c["timeout_mode"], c["timeout_ms"], c["timeout_max_ms"])
		}
		sp.exchange(t, http.StatusOK, http.MethodPatch, patch, `{"timeout":"250ms","timeout_max":"0s"}`, bearer)
		if c := coupon(); c["timeout_mode"] != "fixed" || c["timeout_ms"] != 250.0 || c["timeout_max_ms"] != nil {
			t.Fatalf("/v1/resilience back to fixed: %v %v max %v", c["timeout_mode"], c["timeout_ms"], c["timeout_max_ms"])
		}

		// Bodies the spec's schema can judge: it must refuse them as the code does.
		for _, body := range []string{`{"nope":1}`, `{"timeout":"abc"}`, `{"timeout":"automatic"}`, `{"timeout":5}`, `{"bulkhead":{"max_concurrent":-1}}`, `{"breaker":{"surprise":1}}`, `not json`} {
			sp.exchange(t, http.StatusBadRequest, http.MethodPatch, patch, body, bearer)
			if err := sp.validateRequest(http.MethodPatch, patch, body, bearer); err == nil {
				t.Errorf("the spec accepts the PATCH body %s that the service refuses", body)
			}
		}
		// Bodies only the service can judge (a timeout past the deadline).
		sp.exchange(t, http.StatusBadRequest, http.MethodPatch, patch, `{"timeout":"5s"}`, bearer)
		sp.exchange(t, http.StatusBadRequest, http.MethodPatch, patch, ``, bearer)
		sp.exchange(t, http.StatusRequestEntityTooLarge, http.MethodPatch, patch, `{"timeout":"`+strings.Repeat("1", 70<<10)+`ms"}`, bearer)
		sp.exchange(t, http.StatusNotFound, http.MethodPatch, adminURL+"/admin/dependencies/payments", `{"timeout":"1s"}`, bearer)

		for _, body := range []string{`{"force":"sideways"}`, `{}`, `{"force":"open","extra":1}`, `[]`} {
			sp.exchange(t, http.StatusBadRequest, http.MethodPost, force, body, bearer)
			if err := sp.validateRequest(http.MethodPost, force, body, bearer); err == nil {
				t.Errorf("the spec accepts the breaker body %s that the service refuses", body)
			}
		}
		sp.exchange(t, http.StatusNotFound, http.MethodPost, adminURL+"/admin/dependencies/payments/breaker", `{"force":"open"}`, bearer)
		r = sp.exchange(t, http.StatusOK, http.MethodPost, force, `{"force":"closed"}`, bearer)
		if r.body["name"] != "logistics" || r.body["force"] != "closed" {
			t.Fatalf("%v", r.body)
		}
		sp.exchange(t, http.StatusOK, http.MethodPost, force, `{"force":"none"}`, bearer)
		sp.exchange(t, http.StatusOK, http.MethodGet, list, "", bearer)
	})
}

// TestOpenAPIOverloaded validates the other 503: admission refused beyond
// --max-inflight.
func TestOpenAPIOverloaded(t *testing.T) {
	sp := loadSpec(t)
	// The first request holds the only slot until the test lets it go: its
	// order call hangs under a deadline and a sub-budget far longer than the
	// test, and ends when the test cancels it. No clock decides which of the
	// two requests is refused.
	s, _ := startService(t, []string{"--max-inflight", "1"}, func(c *config.Serve) {
		c.Deadline = time.Minute
		c.Dependencies.Update("order", func(d *config.Dependency) { d.Timeout = time.Minute })
	})
	api := "http://" + s.addrs.API
	if r, err := send(http.MethodPut, "http://"+s.addrs.Sim+"/faults/order", `{"hang":true}`, nil); err != nil || r.status != http.StatusOK {
		t.Fatalf("fault: %v %d", err, r.status)
	}
	before := s.simRequests()["order"]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/v1/orders/o-slow", nil)
		if err != nil {
			first <- err
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("the hanging request got %d before the test let it go", resp.StatusCode)
		} else if errors.Is(err, context.Canceled) {
			err = nil
		}
		first <- err
	}()
	// Wait until the first request holds the only slot (its order call has
	// reached the simulator), then knock.
	waitUntil(t, func() bool { return s.simRequests()["order"] != before })
	r := sp.exchange(t, http.StatusServiceUnavailable, http.MethodGet, api+"/v1/orders/o-knock", "", nil)
	if r.code() != handlers.CodeOverloaded {
		t.Fatalf("code %q: %s", r.code(), r.raw)
	}
	cancel()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}
