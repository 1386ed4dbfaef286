package orderdetail

import "sync"

// workers runs the sections' calls on goroutines it keeps, so that a stack
// grown by one page's call serves the next page's.
type workers struct {
	jobs chan func()
	done chan struct{}
	stop sync.Once
	wg   sync.WaitGroup
}

// startWorkers starts n kept goroutines; n ≤ 0 keeps none.
func startWorkers(n int) *workers {
	w := &workers{jobs: make(chan func()), done: make(chan struct{})}
	for range n {
		w.wg.Go(func() {
			for {
				select {
				case f := <-w.jobs:
					f()
				case <-w.done:
					return
				}
			}
		})
	}
	return w
}

// run runs f on an idle kept goroutine, else on a new one, never waiting;
// wg is done when f returns.
func (w *workers) run(wg *sync.WaitGroup, f func()) {
	wg.Add(1)
	job := func() { defer wg.Done(); f() }
	select {
	case w.jobs <- job:
	default:
		go job()
	}
}

// close stops the kept goroutines, once their calls are done, and waits for them.
func (w *workers) close() { w.stop.Do(func() { close(w.done) }); w.wg.Wait() }
