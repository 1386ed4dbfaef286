package orderdetail

import (
	"sync"
	"sync/atomic"
)

// workers runs the sections' calls of every page on goroutines that outlive
// the page. A goroutine started per call begins on the smallest stack and
// grows it, copying it each time, on its way down through the guard,
// net/http and encoding/json; a parked worker keeps the stack it grew. The
// hand-off costs what starting a goroutine costs (the worker is made
// runnable on the same P).
//
// At most maxIdle workers wait for work; a worker finishing when that many
// already wait exits instead, and a call finding none idle starts a new
// one, so concurrency is never limited here. Close stops the idle workers
// and waits for the busy ones; work handed in after Close runs on a
// goroutine of its own.
type workers struct {
	jobs    chan func() // unbuffered: a send succeeds only into an idle worker
	quit    chan struct{}
	idle    atomic.Int32
	maxIdle int32

	mu     sync.Mutex // guards closed and the Add of running against Close's Wait
	closed bool
	run    sync.WaitGroup
}

func newWorkers(maxIdle int) *workers {
	return &workers{jobs: make(chan func()), quit: make(chan struct{}), maxIdle: int32(maxIdle)}
}

// Go runs f on an idle worker or, if none waits, on a new one.
func (w *workers) Go(f func()) {
	select {
	case w.jobs <- f:
		return
	default:
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		go f()
		return
	}
	w.run.Add(1)
	w.mu.Unlock()
	go w.work(f)
}

func (w *workers) work(f func()) {
	defer w.run.Done()
	for {
		f()
		if w.idle.Add(1) > w.maxIdle {
			w.idle.Add(-1)
			return
		}
		select {
		case f = <-w.jobs:
			w.idle.Add(-1)
		case <-w.quit:
			w.idle.Add(-1)
			return
		}
	}
}

// Close stops the workers and waits until every one has returned.
func (w *workers) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.quit)
	}
	w.mu.Unlock()
	w.run.Wait()
}
