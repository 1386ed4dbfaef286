package sim

import (
	"errors"
	"strings"
	"testing"
)

// FuzzDecodeFault: a fault body is either refused with ErrInvalidFault or
// decodes to a fault inside the documented ranges — never a panic.
func FuzzDecodeFault(f *testing.F) {
	for _, s := range []string{`{}`, `{"hang":true}`, `{"error_rate":1,"error_status":503}`, `{"latency_ms":-1}`,
		`{"error_rate":"1"}`, `[]`, ``, `{"latency_ms":1} {}`, `{"jitter_ms":1e9}`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, err := decodeFault(strings.NewReader(body))
		if err != nil {
			if !errors.Is(err, ErrInvalidFault) {
				t.Fatalf("error %v does not match ErrInvalidFault", err)
			}
			return
		}
		if got.LatencyMS < 0 || got.LatencyMS > MaxDelayMS || got.JitterMS < 0 || got.JitterMS > MaxDelayMS ||
			!(got.ErrorRate >= 0 && got.ErrorRate <= 1) || got.ErrorStatus < 400 || got.ErrorStatus > 599 {
			t.Fatalf("accepted an out-of-range fault %+v from %q", got, body)
		}
	})
}
