package cache

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzDecode: any three fields a Redis hash could hold decode to an entry
// with valid JSON and a plausible as_of, or to a miss — never a panic.
func FuzzDecode(f *testing.F) {
	f.Add("1", "1767225600000000", `{"status":"IN_TRANSIT"}`)
	f.Add("2", "1767225600000000", `{}`)
	f.Add("1", "-5", `[]`)
	f.Add("1", "99999999999999999999", `{}`)
	f.Add("1", "1767225600000000", `{"truncated":`)
	f.Add("", "", "")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v, asOf, val string) {
		e, ok, err := decode([]any{v, asOf, val}, now.Add(5*time.Second))
		if !ok {
			t.Fatal("three present fields reported as an absent key")
		}
		if err != nil {
			return
		}
		if !json.Valid(e.Payload) {
			t.Fatalf("served invalid JSON %q", e.Payload)
		}
		if e.AsOf.After(now.Add(5 * time.Second)) {
			t.Fatalf("served an entry from the future: %v", e.AsOf)
		}
	})
}
