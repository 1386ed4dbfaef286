package config

import (
	"reflect"
	"testing"
)

// FuzzPatchDependency: a PATCH body either is refused, leaving the settings
// untouched, or yields settings that validate — never a panic.
func FuzzPatchDependency(f *testing.F) {
	for _, s := range []string{`{"timeout":"300ms"}`, `{"breaker":{"sleep_window":"10s"}}`, `{"nope":1}`, `[]`, ``,
		`{"bulkhead":{"max_concurrent":-1}}`, `{"retry":{"max_attempts":3,"backoff":"5ms"}}`, `timeout: 1s`, `{"timeout":null}`} {
		f.Add(s)
	}
	base := must(DefaultDependencies(), "coupon")
	f.Fuzz(func(t *testing.T, body string) {
		cur := base
		got, err := PatchDependency(cur, []byte(body))
		if !reflect.DeepEqual(cur, base) {
			t.Fatal("PatchDependency changed its argument")
		}
		if err != nil {
			return
		}
		if verr := got.Config.Validate(); verr != nil {
			t.Fatalf("accepted %q giving invalid settings: %v", body, verr)
		}
	})
}
