package reviews_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orderagg/orderagg/examples/reviews"
	"github.com/orderagg/orderagg/internal/admission"
	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// go-redis's dialer goroutine ends on its own within a second of
		// Close (app.Serve in serve_test.go), as in internal/app's tests.
		goleak.IgnoreTopFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	)
}

// reviewsService is a fake reviews service whose behaviour a test switches.
type reviewsService struct {
	mode     atomic.Value // "ok", "fail", "hang", "garbage", "html", "404"
	calls    atomic.Int64 // requests for a review path
	lastPath atomic.Value // the escaped path of the last one
	clock    *stillClock  // for page's reviews guard; a "hang" expires it
	srv      *httptest.Server
}

func newReviewsService(t *testing.T) *reviewsService {
	rs := &reviewsService{clock: &stillClock{now: time.Now()}}
	rs.mode.Store("ok")
	rs.lastPath.Store("")
	rs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := strings.CutPrefix(r.URL.Path, "/reviews/v1/orders/")
		id, ok2 := strings.CutSuffix(id, "/reviews")
		if !ok || !ok2 {
			http.NotFound(w, r)
			return
		}
		rs.calls.Add(1)
		rs.lastPath.Store(r.URL.EscapedPath())
		switch rs.mode.Load() {
		case "fail":
			http.Error(w, `{"error":{"code":"INTERNAL","message":"boom"}}`, http.StatusInternalServerError)
			return
		case "hang":
			rs.clock.expire()
			<-r.Context().Done() // until the client gives up
			return
		case "404":
			http.NotFound(w, r)
			return
		case "html":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>maintenance</html>")
			return
		case "garbage":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"order_id":%q,"reviews":[{"sku":"SKU-1","author":"Ana","rating":9,"text":"","at":"2026-01-02T03:04:05Z"}]}`, id)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"order_id":%q,"reviews":[`+
			`{"sku":"SKU-1","author":"Ana","rating":5,"text":"Warm and soft.","at":"2026-01-02T03:04:05Z"},`+
			`{"sku":"SKU-2","author":"Ben","rating":4,"text":"Good mug.","at":"2026-01-03T03:04:05Z"}]}`, id)
	}))
	t.Cleanup(rs.srv.Close)
	return rs
}

// memStore is an in-memory last-good store (the real one is Redis).
type memStore struct {
	mu sync.Mutex
	m  map[string]orderdetail.CacheEntry
}

func (s *memStore) Get(_ context.Context, dep, id string) (orderdetail.CacheEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[dep+"/"+id]
	if !ok {
		return orderdetail.CacheEntry{}, orderdetail.ErrCacheMiss
	}
	return e, nil
}

func (s *memStore) PutContext(_ context.Context, dep, id string, e orderdetail.CacheEntry, _ time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[dep+"/"+id]; !ok || e.AsOf.After(old.AsOf) {
		s.m[dep+"/"+id] = e
	}
}

func guard(t *testing.T, name string, cfg resilience.Config) *resilience.Guard {
	t.Helper()
	g, err := resilience.New(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// stillClock is the reviews guard's clock in page: time stands still, so a
// retry's backoff is over at once and no attempt ever looks slow, and the
// sub-budget ends when, and only when, expire is called (the fake service
// calls it as a hang arrives). What a page shows then depends on what the
// service did, never on how loaded the machine is.
type stillClock struct {
	now     time.Time
	mu      sync.Mutex
	expired bool
	ends    []context.CancelCauseFunc
}

func (c *stillClock) Now() time.Time { return c.now }

func (c *stillClock) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func (c *stillClock) WithDeadline(ctx context.Context, _ time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.expired {
		cancel(context.DeadlineExceeded)
	}
	c.ends = append(c.ends, cancel)
	return ctx, func() { cancel(context.Canceled) }
}

// expire ends every sub-budget, the current ones and those to come.
func (c *stillClock) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expired = true
	for _, cancel := range c.ends {
		cancel(context.DeadlineExceeded)
	}
}

// page builds the aggregation as internal/app/serve.go does — the core, and
// the reviews section built from its registry entry (Entry.New with a
// client configuration, a guard and the entry's maximum cache age) — puts
// the public HTTP API in front of it, and returns a function that fetches
// one page's JSON. The reviews guard runs on rs's stillClock.
func page(t *testing.T, rs *reviewsService) func(id string) (int, http.Header, map[string]json.RawMessage) {
	t.Helper()
	g, err := resilience.New(reviews.Entry.Name, reviews.Entry.Defaults, resilience.WithClock(rs.clock))
	if err != nil {
		t.Fatal(err)
	}

	// What serve.go's loop over downstream.Registered() does for the entry.
	section, closeClient, err := reviews.Entry.New(reviews.Entry, downstream.Config{BaseURL: rs.srv.URL}, g, reviews.Entry.CacheMaxAge)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeClient)
	if section.Name() != reviews.Entry.Section || section.MaxAge() != 10*time.Minute {
		t.Fatalf("section %q, max age %v", section.Name(), section.MaxAge())
	}

	core := orderdetail.NewCore(orderdetail.Spec[downstream.Order]{Name: "order", Guard: guard(t, "order", resilience.Config{Timeout: time.Second}), MaxAge: time.Hour,
		Fetch: func(_ context.Context, id string) (downstream.Order, error) {
			return downstream.Order{ID: id, Status: "PAID", Currency: "EUR", Items: []downstream.OrderItem{{SKU: "SKU-1", Quantity: 1}, {SKU: "SKU-2", Quantity: 2}}}, nil
		}})
	agg, err := orderdetail.New(orderdetail.Config{
		Core:       core,
		Sections:   []*orderdetail.Downstream{section},
		Store:      &memStore{m: map[string]orderdetail.CacheEntry{}},
		CacheGuard: guard(t, config.NameCache, resilience.Config{Timeout: 50 * time.Millisecond}),
		Reserve:    50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	api := handlers.New(handlers.Options{Pager: agg, Deadline: 1500 * time.Millisecond, Limiter: admission.New(8), Logger: slog.New(slog.DiscardHandler)})
	return func(id string) (int, http.Header, map[string]json.RawMessage) {
		t.Helper()
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/orders/"+id, nil))
		var body map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("invalid JSON %q: %v", rec.Body.String(), err)
		}
		return rec.Code, rec.Header(), body
	}
}

type sectionJSON struct {
	Source   string           `json:"source"`
	Degraded bool             `json:"degraded"`
	Reason   string           `json:"reason"`
	AsOf     string           `json:"as_of"`
	Items    []reviews.Review `json:"items"`
	Average  *float64         `json:"average"`
}

func reviewsOf(t *testing.T, body map[string]json.RawMessage) (sectionJSON, string) {
	t.Helper()
	raw, ok := body[reviews.Entry.Section]
	if !ok {
		t.Fatalf("the page has no %q section: %v", reviews.Entry.Section, body)
	}
	var s sectionJSON
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s, string(raw)
}

func TestPageGainsALiveReviewsSection(t *testing.T) {
	rs := newReviewsService(t)
	get := page(t, rs)
	status, header, body := get("o-1")
	if status != http.StatusOK || string(body["degraded"]) != "false" || header.Get("Cache-Control") != "" {
		t.Fatalf("%d degraded=%s cache-control=%q", status, body["degraded"], header.Get("Cache-Control"))
	}
	s, raw := reviewsOf(t, body)
	// The service sent no average: the decoder computed it.
	if s.Source != "live" || s.Degraded || s.Reason != "" || s.AsOf != "" || len(s.Items) != 2 || s.Average == nil || *s.Average != 4.5 {
		t.Fatalf("reviews section %s", raw)
	}
	if s.Items[0].Author != "Ana" || s.Items[1].Rating != 4 || s.Items[1].At.IsZero() {
		t.Fatalf("items %+v", s.Items)
	}
	if got := rs.lastPath.Load(); got != "/reviews/v1/orders/o-1/reviews" {
		t.Fatalf("path %q", got)
	}
}

func TestPageFallsBackToUnknownReviews(t *testing.T) {
	for mode, want := range map[string]struct {
		reason string
		calls  int64
	}{
		"fail":    {"FAILURE", 2}, // a failure: retried once, the default
		"garbage": {"FAILURE", 2}, // a malformed body is a failure too
		"html":    {"FAILURE", 2}, // so is a body that is not JSON
		"hang":    {"TIMEOUT", 1}, // the sub-budget is spent: no retry
		"404":     {"FAILURE", 1}, // the caller's fault: never retried
	} {
		t.Run(mode, func(t *testing.T) {
			rs := newReviewsService(t)
			rs.mode.Store(mode)
			get := page(t, rs)
			status, header, body := get("o-2") // never answered live: no last-good copy
			if status != http.StatusOK || string(body["degraded"]) != "true" || header.Get("Cache-Control") != "no-store" {
				t.Fatalf("%d degraded=%s cache-control=%q", status, body["degraded"], header.Get("Cache-Control"))
			}
			_, raw := reviewsOf(t, body)
			// The semantic default, exactly: no reviews listed, average unknown.
			wantRaw := `{"source":"fallback","degraded":true,"reason":"` + want.reason + `","items":[],"average":null}`
			var gotDoc, wantDoc any
			if json.Unmarshal([]byte(raw), &gotDoc) != nil || json.Unmarshal([]byte(wantRaw), &wantDoc) != nil || !reflect.DeepEqual(gotDoc, wantDoc) {
				t.Fatalf("reviews section\n got %s\nwant %s", raw, wantRaw)
			}
			if n := rs.calls.Load(); n != want.calls {
				t.Fatalf("%d calls to the service, want %d", n, want.calls)
			}
			var order struct {
				Source string `json:"source"`
			}
			if err := json.Unmarshal(body["order"], &order); err != nil || order.Source != "live" {
				t.Fatalf("a reviews failure touched the order: %s", body["order"])
			}
		})
	}
}

func TestPageServesLastGoodReviews(t *testing.T) {
	rs := newReviewsService(t)
	get := page(t, rs)
	if _, _, body := get("o-3"); string(body["degraded"]) != "false" {
		t.Fatalf("warm-up degraded: %s", body["degraded"])
	}
	rs.mode.Store("fail")
	status, header, body := get("o-3")
	if status != http.StatusOK || string(body["degraded"]) != "true" || header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d degraded=%s cache-control=%q", status, body["degraded"], header.Get("Cache-Control"))
	}
	s, raw := reviewsOf(t, body)
	if s.Source != "cache" || !s.Degraded || s.Reason != "FAILURE" || s.AsOf == "" || len(s.Items) != 2 || s.Average == nil || *s.Average != 4.5 {
		t.Fatalf("reviews section %s", raw)
	}
	if asOf, err := time.Parse(time.RFC3339Nano, s.AsOf); err != nil || time.Since(asOf) > time.Minute {
		t.Fatalf("as_of %q: %v", s.AsOf, err)
	}
}

// The client is downstream.NewClient(name, API, cfg): the example writes no HTTP
// code, yet its errors are classified like every other client's.
func TestClientOfAPI(t *testing.T) {
	rs := newReviewsService(t)
	c, err := downstream.NewClient("reviews", reviews.API, downstream.Config{BaseURL: rs.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// The path escapes the id (the page's ids never need it, other callers'
	// might).
	r, err := c.Get(ctx, "o 1/x")
	if err != nil || len(r.Items) != 2 || rs.lastPath.Load() != "/reviews/v1/orders/o%201%2Fx/reviews" {
		t.Errorf("escaped id: %+v, %v, path %q", r, err, rs.lastPath.Load())
	}

	for mode, want := range map[string]struct {
		is   error
		kind resilience.Kind
	}{
		"404":     {orderdetail.ErrNotFound, resilience.KindBadRequest},
		"fail":    {nil, resilience.KindFailure},
		"garbage": {downstream.ErrMalformed, resilience.KindFailure},
		"html":    {downstream.ErrMalformed, resilience.KindFailure},
	} {
		rs.mode.Store(mode)
		_, err := c.Get(ctx, "o-5")
		if err == nil || (want.is != nil && !errors.Is(err, want.is)) || resilience.KindOf(err) != want.kind {
			t.Errorf("%s: %v (kind %v): want %v, kind %v", mode, err, resilience.KindOf(err), want.is, want.kind)
		}
	}
	rs.mode.Store("hang")
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := c.Get(tctx, "o-5"); resilience.KindOf(err) != resilience.KindDeadline {
		t.Errorf("hang: %v (kind %v): want the caller's deadline", err, resilience.KindOf(err))
	}
}

func TestDecodeAccepts(t *testing.T) {
	const at = `"at":"2026-01-02T03:04:05Z"`
	for name, tc := range map[string]struct {
		body    string
		items   int
		average *float64
	}{
		"no reviews":             {`{"order_id":"o-1","reviews":[]}`, 0, nil},
		"no reviews, null avg":   {`{"order_id":"o-1","reviews":[],"average":null}`, 0, nil},
		"average computed":       {`{"order_id":"o-1","reviews":[{"sku":"A","author":"Ana","rating":5,"text":"",` + at + `},{"sku":"B","author":"","rating":2,"text":"meh",` + at + `}]}`, 2, ptr(3.5)},
		"average half a step up": {`{"order_id":"o-1","reviews":[{"sku":"A","author":"a","rating":1,"text":"",` + at + `},{"sku":"A","author":"b","rating":1,"text":"",` + at + `},{"sku":"B","author":"c","rating":2,"text":"",` + at + `},{"sku":"B","author":"d","rating":3,"text":"",` + at + `}],"average":1.8}`, 4, ptr(1.8)},
		"average sent, rounded":  {`{"order_id":"o-1","reviews":[{"sku":"A","author":"a","rating":5,"text":"",` + at + `},{"sku":"A","author":"b","rating":5,"text":"",` + at + `},{"sku":"B","author":"c","rating":4,"text":"",` + at + `}],"average":4.7}`, 3, ptr(4.7)},
		"unknown fields":         {`{"order_id":"o-1","page":1,"reviews":[{"sku":"A","author":"Ana","rating":1,"text":"",` + at + `,"helpful":3}]}`, 1, ptr(1)},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := decode([]byte(tc.body), "o-1")
			if err != nil {
				t.Fatal(err)
			}
			if r.Items == nil || len(r.Items) != tc.items {
				t.Fatalf("items %#v, want %d", r.Items, tc.items)
			}
			if (r.Average == nil) != (tc.average == nil) || r.Average != nil && *r.Average != *tc.average {
				t.Fatalf("average %v, want %v", fmtPtr(r.Average), fmtPtr(tc.average))
			}
		})
	}
}

// A 200 that is not what the service promises is a failure of the
// dependency, never a page with invented values.
func TestDecodeRejects(t *testing.T) {
	review := func(fields string) string {
		return `{"order_id":"o-1","reviews":[{` + fields + `}]}`
	}
	const ok = `"sku":"A","author":"Ana","text":"",`
	const at = `"at":"2026-01-02T03:04:05Z"`
	for name, tc := range map[string]struct{ body, says string }{
		"wrong order id":       {`{"order_id":"o-2","reviews":[]}`, `order_id "o-2" is not the requested "o-1"`},
		"no order id":          {`{"reviews":[]}`, "order_id is missing"},
		"empty order id":       {`{"order_id":"","reviews":[]}`, `order_id "" is not the requested "o-1"`},
		"no reviews list":      {`{"order_id":"o-1"}`, "reviews is missing"},
		"null reviews list":    {`{"order_id":"o-1","reviews":null}`, "reviews is missing"},
		"rating 0":             {review(ok + `"rating":0,` + at), "reviews[0].rating is not 1 to 5"},
		"rating 6":             {review(ok + `"rating":6,` + at), "reviews[0].rating is not 1 to 5"},
		"no rating":            {review(ok + at), "reviews[0].rating is not 1 to 5"},
		"no time":              {review(ok + `"rating":4`), "reviews[0].at is missing"},
		"null time":            {review(ok + `"rating":4,"at":null`), "reviews[0].at is missing"},
		"zero time":            {review(ok + `"rating":4,"at":"0001-01-01T00:00:00Z"`), "reviews[0].at is missing"},
		"no sku":               {review(`"author":"Ana","text":"","rating":4,` + at), "reviews[0].sku is empty"},
		"empty sku":            {review(`"sku":"","author":"Ana","text":"","rating":4,` + at), "reviews[0].sku is empty"},
		"rating as a string":   {review(ok + `"rating":"5",` + at), "cannot unmarshal"},
		"rating as a fraction": {review(ok + `"rating":4.5,` + at), "cannot unmarshal"},
		"time not a time":      {review(ok + `"rating":4,"at":"yesterday"`), "yesterday"},
		"order id a number":    {`{"order_id":1,"reviews":[]}`, "cannot unmarshal"},
		"reviews an object":    {`{"order_id":"o-1","reviews":{}}`, "cannot unmarshal"},
		"average a string":     {`{"order_id":"o-1","reviews":[],"average":"4.5"}`, "cannot unmarshal"},
		"average inconsistent": {`{"order_id":"o-1","reviews":[{` + ok + `"rating":5,` + at + `}],"average":4.5}`, "average is not the ratings' mean"},
		"average, no reviews":  {`{"order_id":"o-1","reviews":[],"average":0}`, "average is not null exactly when there are no reviews"},
		"not JSON":             {`<html>`, "invalid character"},
		"trailing data":        {`{"order_id":"o-1","reviews":[]} {}`, "invalid character"},
		"empty body":           {``, "unexpected end"},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := decode([]byte(tc.body), "o-1")
			if !errors.Is(err, downstream.ErrMalformed) {
				t.Fatalf("Decode(%s) = %+v, %v: want ErrMalformed", tc.body, r, err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not say %q", err, tc.says)
			}
			if r.Items != nil || r.Average != nil {
				t.Fatalf("a rejected body still gave %+v", r)
			}
		})
	}
}

// A last-good payload (Reviews as JSON) passes the live rules: a live
// answer's payload decodes to itself, an edited one is refused.
func TestDecodeCached(t *testing.T) {
	const at = `"at":"2026-01-02T03:04:05Z"`
	live, err := decode([]byte(`{"order_id":"o-1","reviews":[{"sku":"A","author":"Ana","rating":5,"text":"",`+at+`},{"sku":"B","author":"","rating":4,"text":"ok",`+at+`}]}`), "o-1")
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(live)
	got, err := reviews.API.DecodeCached(payload, "o-1")
	if again, _ := json.Marshal(got); err != nil || string(again) != string(payload) {
		t.Fatalf("payload %s decodes to %s, %v", payload, again, err)
	}
	for name, edited := range map[string]string{
		"rating 6":             strings.Replace(string(payload), `"rating":5`, `"rating":6`, 1),
		"average inconsistent": strings.Replace(string(payload), `"average":4.5`, `"average":1`, 1),
		"average, no reviews":  `{"items":[],"average":3}`,
		"items null":           `{"items":null,"average":null}`,
		"not JSON":             `{"items":[`,
	} {
		if edited == string(payload) {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if r, err := reviews.API.DecodeCached([]byte(edited), "o-1"); !errors.Is(err, downstream.ErrMalformed) {
			t.Errorf("%s: DecodeCached(%s) = %+v, %v: want ErrMalformed", name, edited, r, err)
		}
	}
}

// decode reads a live answer as the client does: API.Decode, then API.Check.
func decode(body []byte, id string) (reviews.Reviews, error) {
	r, err := reviews.API.Decode(body, id)
	if err == nil {
		err = reviews.API.Check(r, id)
	}
	if err != nil {
		return reviews.Reviews{}, err
	}
	return r, nil
}

// The entry follows the registry's rules (registry_test.go's
// TestRegistryIsWellFormed) and could be appended to its list as it is.
func TestEntryFitsTheRegistry(t *testing.T) {
	e := reviews.Entry
	if e.Name != "reviews" || e.Section != "reviews" || e.Core || e.New == nil || e.CacheMaxAge != 10*time.Minute {
		t.Fatalf("entry %+v", e)
	}
	name := regexp.MustCompile(`^[a-z][a-z0-9]*$`) // a flag, an env var, a YAML key and a label
	if !name.MatchString(e.Name) || !name.MatchString(e.Section) || e.Name == config.NameCache {
		t.Fatalf("name %q, section %q", e.Name, e.Section)
	}
	if !slices.Contains(downstream.Names(), e.Name) {
		t.Fatalf("importing the package did not register %q: %v", e.Name, downstream.Names())
	}
	for _, d := range downstream.Registered() {
		if d.Name == e.Name {
			continue // already registered
		}
		if d.Section == e.Section {
			t.Errorf("section %q is %q's already", e.Section, d.Name)
		}
	}
	// A client configuration that config would refuse is refused here too.
	if _, _, err := e.New(e, downstream.Config{BaseURL: "ftp://reviews"}, guard(t, e.Name, e.Defaults), e.CacheMaxAge); err == nil || !strings.Contains(err.Error(), "downstream: reviews:") {
		t.Errorf("Build with an ftp URL: %v", err)
	}
}

// The entry's defaults pass the rules internal/config applies to every
// downstream at start-up, on a SIGHUP reload and on an admin PATCH.
func TestEntryDefaultsPassConfigRules(t *testing.T) {
	bounds := config.DefaultServe().Bounds() // --deadline and --reserve's defaults
	d := config.Dependency{Config: reviews.Entry.Defaults.WithDefaults(), CacheMaxAge: reviews.Entry.CacheMaxAge}
	if err := d.Config.Validate(); err != nil {
		t.Fatal(err)
	}
	// Dependencies.Validate knows only registered names, and its
	// rules for a downstream do not depend on which one it is: put the
	// entry's settings in each downstream's place and validate the whole set.
	for _, name := range downstream.Names() {
		deps := config.DefaultDependencies()
		deps[name] = d
		if err := deps.Validate(bounds); err != nil {
			t.Errorf("in %s's place: %v", name, err)
		}
		// The check is not vacuous: a sub-budget reaching the calls' end fails.
		bad := deps
		bad.Update(name, func(x *config.Dependency) { x.Timeout = bounds.CallsEnd() })
		if err := bad.Validate(bounds); err == nil || !strings.Contains(err.Error(), "dependencies."+name+".timeout") {
			t.Errorf("a %v timeout in %s's place: %v", bounds.CallsEnd(), name, err)
		}
	}
	// The same rules, spelled out.
	cache, _ := config.DefaultDependencies().Get(config.NameCache)
	if d.Timeout >= bounds.CallsEnd() || d.CacheMaxAge <= 0 || d.FallbackTimeout <= cache.Timeout {
		t.Fatalf("timeout %v, cache_max_age %v, fallback_timeout %v (cache timeout %v)", d.Timeout, d.CacheMaxAge, d.FallbackTimeout, cache.Timeout)
	}
	// What the entry leaves to the resilience defaults: one retry and the
	// breaker; and the bulkhead to internal/config, which sizes it from
	// --max-inflight.
	if reviews.Entry.Defaults.Bulkhead.MaxConcurrent != 0 || d.Retry.MaxAttempts != 2 {
		t.Fatalf("settings %+v", d.Config)
	}
	// The guard accepts them, and the admin API shows them keyed like the
	// --config file.
	guard(t, reviews.Entry.Name, d.Config)
	if s := d.Settings(); s["timeout"] != "250ms" || s["cache_max_age"] != "10m" {
		t.Fatalf("settings %v", s)
	}
}

func ptr(f float64) *float64 { return &f }

func fmtPtr(p *float64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
