package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/afex/hystrix-go/hystrix"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/orderagg/orderagg/internal/resilience"
	"github.com/sony/gobreaker/v2"
)

// call runs fn under one implementation's guard. fn gets the context the
// implementation hands it (with the timeout, where the implementation derives
// one) and must honour it.
type call func(ctx context.Context, fn func(context.Context) (int, error)) (int, error)

// spec is what every implementation is built with, so that they protect the
// same thing the same way: a bulkhead of Capacity without a queue, a breaker
// over a 10s rolling window (50% errors over at least MinRequests calls,
// 5s open), and a per-call Timeout.
type spec struct {
	Capacity    int
	Timeout     time.Duration
	MinRequests int // calls in the window before a breaker may trip; huge = never
}

type impl struct {
	name string
	new  func(s spec) call
	// turnedAway reports whether err says the call never reached the
	// dependency: bulkhead full or breaker open.
	turnedAway func(err error) bool
}

// impls are the implementations in the order the benchmarks report them.
var impls = []impl{
	{"orderagg", newOrderagg, func(err error) bool {
		return errors.Is(err, resilience.ErrRejected) || errors.Is(err, resilience.ErrShortCircuited)
	}},
	{"failsafe", newFailsafe, func(err error) bool {
		return errors.Is(err, bulkhead.ErrFull) || errors.Is(err, circuitbreaker.ErrOpen)
	}},
	{"hystrix", newHystrix, func(err error) bool {
		return errors.Is(err, hystrix.ErrMaxConcurrency) || errors.Is(err, hystrix.ErrCircuitOpen)
	}},
	{"gobreaker", newGobreaker, func(err error) bool {
		return errors.Is(err, errRejected) || errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
	}},
	{"floor", newFloor, func(err error) bool { return errors.Is(err, errRejected) }},
}

// errRejected is what the hand-rolled implementations return when full or open.
var errRejected = errors.New("rejected")

// orderagg: resilience.Do with the defaults (retries on failure,
// rolling-window breaker, latency histogram) and the spec's bulkhead/timeout.
func newOrderagg(s spec) call {
	g, err := resilience.New("bench", resilience.Config{
		Timeout:  s.Timeout,
		Bulkhead: resilience.BulkheadConfig{MaxConcurrent: s.Capacity},
		Breaker:  resilience.BreakerConfig{MinRequests: s.MinRequests},
	})
	if err != nil {
		panic(err)
	}
	return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
		return resilience.Do(ctx, g, fn)
	}
}

// failsafe: circuit breaker (time-based failure rate, like ours) outside a
// bulkhead outside a timeout; the executor is built once and given the
// caller's context per call.
func newFailsafe(s spec) call {
	cb := circuitbreaker.NewBuilder[int]().
		WithFailureRateThreshold(0.5, uint(s.MinRequests), 10*time.Second).
		WithDelay(5 * time.Second).
		Build()
	bh := bulkhead.New[int](uint(s.Capacity))
	to := timeout.New[int](s.Timeout)
	ex := failsafe.With[int](cb, bh, to)
	return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
		return ex.WithContext(ctx).GetWithExecution(func(e failsafe.Execution[int]) (int, error) {
			return fn(e.Context())
		})
	}
}

var hystrixSeq atomic.Int64

// hystrix: DoC with the command's timeout, max concurrency and breaker
// settings; it runs fn on a goroutine of its own and passes the caller's ctx.
func newHystrix(s spec) call {
	name := fmt.Sprintf("bench-%d", hystrixSeq.Add(1))
	hystrix.ConfigureCommand(name, hystrix.CommandConfig{
		Timeout:                int(s.Timeout / time.Millisecond),
		MaxConcurrentRequests:  s.Capacity,
		RequestVolumeThreshold: s.MinRequests,
		SleepWindow:            5000,
		ErrorPercentThreshold:  50,
	})
	return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
		var v int
		err := hystrix.DoC(ctx, name, func(ctx context.Context) error {
			var err error
			v, err = fn(ctx)
			return err
		}, nil)
		return v, err
	}
}

// gobreaker: sony/gobreaker v2 (rolling 10s window in 1s buckets) plus a
// non-blocking channel semaphore plus context.WithTimeout.
func newGobreaker(s spec) call {
	min := uint32(min(s.MinRequests, 1<<31))
	cb := gobreaker.NewCircuitBreaker[int](gobreaker.Settings{
		Name:         "bench",
		Interval:     10 * time.Second,
		BucketPeriod: time.Second,
		Timeout:      5 * time.Second,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.Requests >= min && c.TotalFailures*2 >= c.Requests
		},
	})
	sem := make(chan struct{}, s.Capacity)
	d := s.Timeout
	return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
		select {
		case sem <- struct{}{}:
		default:
			return 0, errRejected
		}
		defer func() { <-sem }()
		cctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return cb.Execute(func() (int, error) { return fn(cctx) })
	}
}

// floor: the least a bulkhead + breaker + timeout can do: a non-blocking
// channel semaphore, one atomic load for the breaker, context.WithTimeout.
// It records nothing.
func newFloor(s spec) call {
	var open atomic.Bool
	sem := make(chan struct{}, s.Capacity)
	d := s.Timeout
	return func(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
		if open.Load() {
			return 0, errRejected
		}
		select {
		case sem <- struct{}{}:
		default:
			return 0, errRejected
		}
		defer func() { <-sem }()
		cctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return fn(cctx)
	}
}
