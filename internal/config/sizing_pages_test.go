package config_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderagg/orderagg/internal/admission"
	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/downstream"
	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// barrier holds every call to every downstream until each downstream has
// heard from every page: a call in flight, or one its guard refused at the
// door. Then it lets them all answer. The
// downstreams are healthy but slow: slow exactly until every admitted page
// is calling each of them at the same moment. No clock is involved.
type barrier struct {
	want    int
	mu      sync.Mutex
	heard   map[string]int // calls in flight plus calls refused, by dependency
	inside  map[string]int // calls that reached the downstream
	full    map[string]chan struct{}
	release chan struct{}
}

func newBarrier(want int) *barrier {
	b := &barrier{want: want, heard: map[string]int{}, inside: map[string]int{}, full: map[string]chan struct{}{}, release: make(chan struct{})}
	for _, name := range downstream.Names() {
		b.full[name] = make(chan struct{})
	}
	return b
}

func (b *barrier) hear(name string, reached bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.heard[name]++
	if reached {
		b.inside[name]++
	}
	if b.heard[name] == b.want {
		close(b.full[name])
	}
}

// call is a downstream's answer, given once the barrier opens.
func (b *barrier) call(ctx context.Context, name string) error {
	b.hear(name, true)
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// OnEvent counts the downstream calls a guard refused without calling:
// REJECTED, SHORT_CIRCUITED, or DEADLINE for a section whose page was
// already given up (the order failed).
func (b *barrier) OnEvent(_ context.Context, e resilience.Event) {
	if _, downstream := b.full[e.Dependency]; downstream && e.Attempt == 0 {
		b.hear(e.Dependency, false)
	}
}

func (b *barrier) OnStateChange(resilience.StateChange)     {}
func (b *barrier) OnTimeoutChange(resilience.TimeoutChange) {}

type emptyStore struct{}

func (emptyStore) Get(context.Context, string, string) (orderdetail.CacheEntry, error) {
	return orderdetail.CacheEntry{}, orderdetail.ErrCacheMiss
}
func (emptyStore) PutContext(context.Context, string, string, orderdetail.CacheEntry, time.Duration) {
}

type sectionBody struct {
	OK bool `json:"ok"`
}

// pagesAtOnce admits maxInflight pages through a fixed admission limit, as
// the order-detail handler does, against downstreams held by a barrier
// until every page has called (or been refused by) each of them. It
// returns the sections that were not live, by dependency and reason, and
// whether one page more was refused by admission while all were held.
func pagesAtOnce(t *testing.T, deps config.Dependencies, maxInflight int) (notLive map[string]int, overRefused bool) {
	t.Helper()
	b := newBarrier(maxInflight)
	t.Cleanup(func() {
		select {
		case <-b.release:
		default:
			close(b.release)
		}
	})
	// Only the timeouts are stretched, so that how fast this machine runs
	// a few thousand goroutines cannot matter: the sizing is under test.
	const long = time.Minute
	guard := func(name string) *resilience.Guard {
		d, _ := deps.Get(name)
		d.Timeout = long
		g, err := resilience.New(name, d.Config, resilience.WithListener(b))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	var core *orderdetail.Downstream
	var rest []*orderdetail.Downstream
	for _, ds := range downstream.Registered() {
		name := ds.Name
		if ds.Core {
			core = orderdetail.NewCore(orderdetail.Spec[downstream.Order]{Name: ds.Section, Guard: guard(name), MaxAge: ds.CacheMaxAge,
				Fetch: func(ctx context.Context, id string) (downstream.Order, error) {
					return downstream.Order{ID: id}, b.call(ctx, name)
				}})
			continue
		}
		rest = append(rest, orderdetail.NewSection(orderdetail.Spec[sectionBody]{Name: ds.Section, Guard: guard(name), MaxAge: ds.CacheMaxAge,
			Fetch: func(ctx context.Context, id string) (sectionBody, error) {
				return sectionBody{OK: true}, b.call(ctx, name)
			},
			Fallback: func(any) sectionBody { return sectionBody{} }}))
	}
	agg, err := orderdetail.New(orderdetail.Config{Core: core, Sections: rest, Store: emptyStore{},
		CacheGuard: guard(config.NameCache), Reserve: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	limiter := admission.New(maxInflight)

	type result struct {
		page *orderdetail.Page
		err  error
	}
	results := make([]result, maxInflight)
	var wg sync.WaitGroup
	for i := range maxInflight {
		if !limiter.TryAcquire() {
			t.Fatalf("page %d of %d refused by admission", i+1, maxInflight)
		}
		wg.Go(func() {
			defer limiter.Release()
			ctx, cancel := context.WithTimeout(context.Background(), long+time.Second)
			defer cancel()
			p, err := agg.Get(ctx, fmt.Sprintf("o-%d", i+1))
			results[i] = result{p, err}
		})
	}
	for _, name := range downstream.Names() {
		<-b.full[name]
	}
	// Every admitted page is now calling every downstream (or was refused).
	if limiter.TryAcquire() {
		limiter.Release()
	} else {
		overRefused = true
	}
	close(b.release)
	wg.Wait()

	notLive = map[string]int{}
	for i, r := range results {
		if r.err != nil {
			notLive["page: "+r.err.Error()]++
			continue
		}
		if r.page == nil {
			t.Fatalf("page %d: nil page", i)
		}
		for _, s := range r.page.Sections {
			if s.Source != orderdetail.SourceLive || s.Degraded {
				notLive[s.Name+" "+string(s.Reason)]++
			}
		}
	}
	return notLive, overRefused
}

// With the built-in settings, --max-inflight pages at once against healthy
// but slow downstreams all come back complete: every downstream has a call
// of every admitted page in flight at the same moment and orderagg refuses
// none of them; the one page more is refused at the door (503 OVERLOADED),
// the one place where orderagg sheds its own load.
func TestMaxInflightPagesAtOnceNeverDegrade(t *testing.T) {
	m := config.DefaultMaxInflight
	notLive, overRefused := pagesAtOnce(t, config.DefaultDependenciesFor(m), m)
	if len(notLive) != 0 {
		t.Errorf("%d pages at once on healthy downstreams: sections not live %v, want none", m, notLive)
	}
	if !overRefused {
		t.Errorf("page %d was admitted", m+1)
	}
}

// The same load with the old built-in bulkheads (order 100, the others 50):
// the pages degrade though every downstream is healthy, which is what the
// test above would catch.
func TestOldBulkheadsDegradeHealthyPages(t *testing.T) {
	const m = 256 // enough to overflow them; the shape is the same at 1024
	deps := config.DefaultDependenciesFor(m)
	for name, n := range map[string]int{"order": 100, "inventory": 50, "coupon": 50, "logistics": 50, config.NameCache: 100} {
		deps.Update(name, func(d *config.Dependency) { d.Bulkhead.MaxConcurrent = n })
	}
	notLive, _ := pagesAtOnce(t, deps, m)
	// Which bulkhead overflows first depends on the scheduling: a section
	// REJECTED, or the order's bulkhead full (then the page is a 503 and its
	// other sections are not even called). Either is a healthy page lost to
	// orderagg's own limits.
	rejected := 0
	for what, n := range notLive {
		if strings.HasSuffix(what, " REJECTED") || strings.Contains(what, "bulkhead full") {
			rejected += n
		}
	}
	if rejected == 0 {
		t.Errorf("old bulkheads: sections not live %v, want pages or sections refused by a bulkhead", notLive)
	}
}
