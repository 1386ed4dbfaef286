package dashboard

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
)

// reportAt is a one-dependency report generated at t whose success count
// is n, so a sample can be told from the next.
func reportAt(t time.Time, n int64) handlers.ResilienceReport {
	return handlers.ResilienceReport{GeneratedAt: t, DeadlineMS: 1500, Dependencies: []handlers.GuardReport{{
		Name: "logistics", Breaker: "CLOSED", Counts: map[string]int64{"success": n, "failure": 0}, ErrorPercent: 1.5, WindowMS: 10000,
	}}}
}

func TestHistoryKeepsTheLastMinute(t *testing.T) {
	var h history
	if got := h.samples(); got == nil || len(got) != 0 {
		t.Fatalf("empty history %#v, want an empty list", got)
	}
	t0 := time.Unix(1_700_000_000, 0).UTC()
	for i := range HistorySize + 10 {
		h.add(reportAt(t0.Add(time.Duration(i)*time.Second), int64(i)))
	}
	got := h.samples()
	if len(got) != HistorySize {
		t.Fatalf("%d samples, want %d", len(got), HistorySize)
	}
	for i, s := range got {
		want := int64(i + 10)
		if s.At != t0.Add(time.Duration(want)*time.Second) || s.Dependencies[0].Counts["success"] != want {
			t.Fatalf("sample %d: %+v, want the report of second %d (oldest first)", i, s, want)
		}
		if _, ok := s.Dependencies[0].Counts["failure"]; ok {
			t.Fatalf("sample %d keeps a zero count: %v", i, s.Dependencies[0].Counts)
		}
	}
}

// The first report of a stream carries the history, in the report's own
// field names, so the page draws it with the code that draws live reports;
// the reports after it do not repeat it.
func TestFirstReportCarriesHistory(t *testing.T) {
	ticker := newManualTicker()
	d := New(Options{Report: countingReport(), newTicker: ticker.newTicker})
	t0 := time.Unix(1_700_000_000, 0).UTC()
	for i := range 3 {
		d.history.add(reportAt(t0.Add(time.Duration(i)*time.Second), int64(10+i)))
	}
	srv := newServer(t, d)
	events, _ := openEvents(t, srv)

	var first struct {
		DeadlineMS int64 `json:"deadline_ms"`
		History    []struct {
			GeneratedAt  time.Time `json:"generated_at"`
			Dependencies []struct {
				Name         string           `json:"name"`
				Counts       map[string]int64 `json:"counts"`
				ErrorPercent float64          `json:"error_percent"`
				WindowMS     int64            `json:"window_ms"`
			} `json:"dependencies"`
		} `json:"history"`
	}
	if err := json.Unmarshal([]byte(events.must("report").data), &first); err != nil {
		t.Fatal(err)
	}
	if first.DeadlineMS != 1 || len(first.History) != 3 {
		t.Fatalf("first report: deadline %d, %d samples; want the report and 3 samples", first.DeadlineMS, len(first.History))
	}
	for i, s := range first.History {
		dep := s.Dependencies[0]
		if !s.GeneratedAt.Equal(t0.Add(time.Duration(i)*time.Second)) || dep.Name != "logistics" || dep.Counts["success"] != int64(10+i) ||
			dep.ErrorPercent != 1.5 || dep.WindowMS != 10000 {
			t.Errorf("sample %d: %+v", i, s)
		}
	}
	ticker.tick(t)
	var next map[string]json.RawMessage
	if err := json.Unmarshal([]byte(events.must("report").data), &next); err != nil {
		t.Fatal(err)
	}
	if _, ok := next["history"]; ok || string(next["deadline_ms"]) != "2" {
		t.Fatalf("second report %v: want the next report, without history", next)
	}
}

// Start samples at once and on every tick, whether or not a stream is
// open, and Close stops it (goleak checks that it is gone).
func TestStartSamplesUntilClose(t *testing.T) {
	ticker := newManualTicker()
	d := New(Options{Report: countingReport(), newTicker: ticker.newTicker})
	d.Start()
	d.Start() // a second call starts nothing more
	ticker.tick(t)
	ticker.tick(t)
	d.Close()
	if n := len(d.history.samples()); n != 3 {
		t.Fatalf("%d samples after two ticks, want 3: one at start, one a tick", n)
	}
	d.Start() // after Close: nothing
	if n := len(d.history.samples()); n != 3 {
		t.Fatalf("Start after Close sampled: %d", n)
	}
}

// Streams are bounded: with MaxStreams open, the next is refused at once
// with 503 TOO_MANY_STREAMS and Retry-After, and closing one frees its slot.
func TestEventStreamsAreBounded(t *testing.T) {
	for _, limit := range []int{3, 0} { // 0: the default, DefaultMaxStreams
		t.Run(strconv.Itoa(limit), func(t *testing.T) {
			ended := make(chan struct{}, DefaultMaxStreams+1)
			d := New(Options{Report: countingReport(), Interval: time.Hour, MaxStreams: limit,
				streamEnded: func() { ended <- struct{}{} }})
			srv := newServer(t, d)
			want := limit
			if want == 0 {
				want = DefaultMaxStreams
			}
			cancels := make([]func(), 0, want)
			for range want {
				events, cancel := openEvents(t, srv)
				events.must("report")
				cancels = append(cancels, cancel)
			}

			refused := func() *http.Response {
				t.Helper()
				resp, err := srv.Client().Get(srv.URL + "/dashboard/events")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var body struct {
					Error struct{ Code, Message string }
				}
				if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
					t.Fatalf("status %d, body not JSON: %v", resp.StatusCode, err)
				}
				if resp.StatusCode != http.StatusServiceUnavailable || body.Error.Code != codeTooManyStreams || resp.Header.Get("Retry-After") == "" {
					t.Fatalf("stream %d: status %d %+v Retry-After %q; want 503 %s with Retry-After",
						want+1, resp.StatusCode, body, resp.Header.Get("Retry-After"), codeTooManyStreams)
				}
				return resp
			}
			refused()
			// HEAD takes no slot: it is answered even now.
			if resp, err := srv.Client().Head(srv.URL + "/dashboard/events"); err != nil || resp.StatusCode != http.StatusOK ||
				resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("HEAD with every slot taken: %v %v", resp, err)
			}

			cancels[0]()
			select {
			case <-ended:
			case <-time.After(5 * time.Second):
				t.Fatal("the cancelled stream's handler did not return within 5s")
			}
			events, _ := openEvents(t, srv)
			events.must("report")
			refused()
		})
	}
}
