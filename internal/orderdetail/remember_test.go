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

// TestEveryLiveAnswerIsHandedToTheStore: every page hands every live
// section to the store, changed or not, however soon after the last: the
// store alone decides what an identical rewrite is, so an answer that
// changed is never held back (newest wins, end to end). Failed before: the
// page's own write throttle skipped every answer of an order for 10 s
// after writing it, changed or not (as serve wired it).
func TestEveryLiveAnswerIsHandedToTheStore(t *testing.T) {
	r := newRig(t, nil)
	status := "IN_TRANSIT"
	r.f.shipment = func() Logistics { return Logistics{Status: status} }
	for i, s := range []string{"IN_TRANSIT", "IN_TRANSIT", "DELIVERED"} {
		status = s
		r.now = r.now.Add(time.Second)
		if _, err := r.get(t, time.Second); err != nil {
			t.Fatal(err)
		}
		r.store.mu.Lock()
		n, e := len(r.store.putCtx), r.store.entries["logistics/o-1"]
		r.store.mu.Unlock()
		if want := 4 * (i + 1); n != want {
			t.Fatalf("page %d: %d writes handed to the store, want %d (every live section of every page)", i, n, want)
		}
		if want := `{"status":"` + s + `"}`; string(e.Payload) != want || !e.AsOf.Equal(r.now) {
			t.Fatalf("page %d: stored logistics %s as of %v, want %s as of %v", i, e.Payload, e.AsOf, want, r.now)
		}
	}
}
