package orderdetail

import (
	"sync"
	"testing"
)

// TestWorkersReuseAndClose: work runs at once whatever the number of idle
// workers (the pool never limits concurrency); Close stops them all
// (TestMain's goleak check fails otherwise); work handed in after Close
// still runs.
func TestWorkersReuseAndClose(t *testing.T) {
	w := newWorkers(2)
	const n = 50
	release := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	for range n {
		w.Go(func() {
			defer done.Done()
			started.Done()
			<-release
		})
	}
	started.Wait() // n at once: none was refused for want of a worker
	close(release)
	done.Wait()
	// Later work is taken by the idle workers or new ones alike.
	for range n {
		var one sync.WaitGroup
		one.Add(1)
		w.Go(one.Done)
		one.Wait()
	}
	var after sync.WaitGroup
	after.Add(1)
	w.Close()
	w.Go(after.Done)
	after.Wait()
	w.Close() // twice is fine
	if got := w.idle.Load(); got != 0 {
		t.Errorf("%d idle workers after Close", got)
	}
}
