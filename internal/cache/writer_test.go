package cache

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestWriteErrorsLogTheirCause: a write that fails because Redis refuses
// the password is logged with Redis's own words (WRONGPASS), not as the
// empty reply go-redis reports for commands a failed pipeline never sent;
// the lines are rate-limited, and they never show the password.
func TestWriteErrorsLogTheirCause(t *testing.T) {
	tests := []struct {
		name, userinfo, want string
	}{
		{"wrong password", ":not-the-password@", "WRONGPASS"},
		{"no password", "", "NOAUTH"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rd := miniredis.RunT(t)
			rd.RequireAuth("the-password")
			var logs syncBuffer
			var mu sync.Mutex
			now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			s, err := Open(context.Background(), Config{
				URL:          relaxed("redis://" + tc.userinfo + rd.Addr() + "/0"),
				WriteTimeout: 10 * time.Second,
			}, bufferLogger(&logs), WithClock(clock))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { _ = s.Close(context.Background()) })

			// Two rounds of writes, the second after the 10s log interval: one
			// line for each, the first round's other failures held back.
			for round := range 2 {
				for i := range 5 {
					put(s, "order", "o-"+strconv.Itoa(i), entry(now.Add(-time.Second), `{}`), time.Minute)
				}
				mustFlush(t, s)
				mu.Lock()
				now = now.Add(10 * time.Second)
				mu.Unlock()
				if round == 0 {
					if st := s.Stats(); st.WriteErrors != 5 {
						t.Fatalf("Stats = %+v, want 5 write errors", st)
					}
				}
			}
			out := logs.String()
			var lines []string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "write failed") {
					lines = append(lines, l)
				}
			}
			if len(lines) != 2 {
				t.Fatalf("%d write-failure lines for 10 failures in two intervals, want 2:\n%s", len(lines), out)
			}
			for _, l := range lines {
				if !strings.Contains(l, tc.want) || strings.Contains(l, "unexpected type") {
					t.Errorf("the line does not give Redis's reason %s:\n%s", tc.want, l)
				}
			}
			if !strings.Contains(lines[1], "suppressed_since_last=4") {
				t.Errorf("the second line does not count the 4 held back:\n%s", lines[1])
			}
			if strings.Contains(out, "not-the-password") {
				t.Errorf("the password is in the logs:\n%s", out)
			}
		})
	}
}
