package orderdetail

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// More calls than kept goroutines all run at once (run never waits for an
// idle one), close waits for the kept ones, and run still works after it.
// TestMain's goleak check fails if a goroutine outlives the test.
func TestWorkersNeverWaitAndStop(t *testing.T) {
	w := startWorkers(2)
	started, release := make(chan struct{}, 10), make(chan struct{})
	var wg sync.WaitGroup
	var ran atomic.Int32
	for range 10 {
		w.run(&wg, func() {
			started <- struct{}{}
			<-release
			ran.Add(1)
		})
	}
	for range 10 { // every call starts, though only 2 goroutines are kept
		<-started
	}
	close(release)
	wg.Wait()
	w.close()
	w.close()
	w.run(&wg, func() { ran.Add(1) })
	wg.Wait()
	if ran.Load() != 11 {
		t.Fatalf("%d calls ran, want 11", ran.Load())
	}
}

// Pages are served on kept goroutines, and after Close on their own.
func TestAggregatorWorkers(t *testing.T) {
	r := newRig(t, nil)
	r.agg.workers = startWorkers(3)
	for range 2 {
		p, err := r.get(t, time.Second)
		if err != nil || p.Degraded {
			t.Fatalf("page %+v, %v", p, err)
		}
		r.agg.Close()
	}
}
