package dashboard

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/orderagg/orderagg/internal/handlers"
	"github.com/orderagg/orderagg/internal/resilience"
	"github.com/orderagg/orderagg/internal/sim"
)

func TestPage(t *testing.T) {
	d := New(Options{Report: countingReport()})
	w := do(t, d, http.MethodGet, "/dashboard", "")
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200", w.Code)
	}
	if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	body := w.Body.String()
	for _, want := range []string{
		"<title>orderagg · resilience</title>",
		`data-demo="false"`,
		`data-interval-ms="1000"`,
		`data-role="breaker"`,
		`data-role="fault-error-rate"`,
		`data-role="fault-break"`,
		`new EventSource("/dashboard/events")`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// Nothing may be fetched from elsewhere: the page must work offline.
	if m := regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).FindString(body); m != "" {
		t.Errorf("page refers to an external asset: %s", m)
	}
	if strings.Contains(body, `data-role="reset-all"`) {
		t.Error("reset-all control shown outside demo mode")
	}

	head := do(t, d, http.MethodHead, "/dashboard", "")
	if head.Code != http.StatusOK || head.Body.Len() != 0 {
		t.Errorf("HEAD: status %d, %d body bytes", head.Code, head.Body.Len())
	}
	if code := errorCode(t, do(t, d, http.MethodPost, "/dashboard", ""), http.StatusMethodNotAllowed); code != handlers.CodeMethodNotAllowed {
		t.Errorf("POST code %s", code)
	}
}

func TestPageDemoMode(t *testing.T) {
	d := New(Options{Report: countingReport(), Faults: sim.New(), Interval: 250_000_000})
	body := do(t, d, http.MethodGet, "/dashboard", "").Body.String()
	for _, want := range []string{`data-demo="true"`, `data-interval-ms="250"`, `data-role="reset-all"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

// The policy allows the page's own inline script and style by hash: if the
// hashes did not match, the browser would run a blank, unstyled page.
func TestPageContentSecurityPolicy(t *testing.T) {
	d := New(Options{Report: countingReport()})
	w := do(t, d, http.MethodGet, "/dashboard", "")
	csp := w.Header().Get("Content-Security-Policy")
	if strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("policy %q", csp)
	}
	body := w.Body.String()
	for _, tag := range []string{"script", "style"} {
		inner := body[strings.Index(body, "<"+tag+">")+len(tag)+2 : strings.Index(body, "</"+tag+">")]
		sum := sha256.Sum256([]byte(inner))
		want := tag + "-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
		if !strings.Contains(csp, want) {
			t.Errorf("policy %q lacks %s", csp, want)
		}
	}
	if w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no X-Content-Type-Options")
	}
}

func TestRouting(t *testing.T) {
	d := New(Options{Report: countingReport()})
	w := do(t, d, http.MethodGet, "/dashboard/", "")
	if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/dashboard" {
		t.Errorf("/dashboard/: status %d, Location %q", w.Code, w.Header().Get("Location"))
	}
	for _, path := range []string{"/dashboard/nope", "/elsewhere", "/dashboard/events/x"} {
		if code := errorCode(t, do(t, d, http.MethodGet, path, ""), http.StatusNotFound); code != handlers.CodeNotFound {
			t.Errorf("%s: code %s", path, code)
		}
	}
	w = do(t, d, http.MethodPost, "/dashboard/events", "")
	if code := errorCode(t, w, http.StatusMethodNotAllowed); code != handlers.CodeMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST events: code %s, Allow %q", code, w.Header().Get("Allow"))
	}
}

func TestNewNeedsReport(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New without Report did not panic")
		}
	}()
	New(Options{})
}

// The page reads handlers.ResilienceReport's JSON; a renamed field would blank part of
// a tile without any Go test noticing. Every field name of the document must
// appear in the page, except the percentiles it deliberately leaves out and
// the bulkhead's queued, always 0 since the bulkhead has no wait queue.
func TestPageReadsEveryReportField(t *testing.T) {
	b, err := json.Marshal(handlers.ResilienceReport{Dependencies: []resilience.Snapshot{{}}})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	notShown := map[string]bool{"p90": true, "p999": true, "queued": true}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				if !notShown[k] && !strings.Contains(pageHTML, k) {
					t.Errorf("page does not read %s", k)
				}
				walk(sub)
			}
		case []any:
			for _, sub := range v {
				walk(sub)
			}
		}
	}
	walk(doc)
}
