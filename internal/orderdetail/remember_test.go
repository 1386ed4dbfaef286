package orderdetail

import (
	"context"
	"testing"
	"time"
)

type requestKey struct{}

// TestWritesCarryTheRequest: every live section is handed to the store with
// the request's context, so the write can be linked to the request's trace.
func TestWritesCarryTheRequest(t *testing.T) {
	r := newRig(t, nil)
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), requestKey{}, "req-1"), time.Second)
	defer cancel()
	if _, err := r.agg.Get(ctx, "o-1"); err != nil {
		t.Fatal(err)
	}
	r.store.mu.Lock()
	defer r.store.mu.Unlock()
	if len(r.store.putCtx) != 4 {
		t.Fatalf("%d writes, want one per section", len(r.store.putCtx))
	}
	for i, c := range r.store.putCtx {
		if c.Value(requestKey{}) != "req-1" {
			t.Errorf("write %d was handed a context without the request's values", i)
		}
	}
}
