package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/orderagg/orderagg/internal/config"
	"github.com/orderagg/orderagg/internal/sim"
)

// TestChaos drives steady load while faults change at random on all four
// downstreams and on Redis (through a proxy that can freeze or cut it), and
// checks the contract's invariants on every answer. ORDERAGG_CHAOS_DURATION
// sets how long (default 20s; the closing figures quote a 60s run).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run skipped in -short mode")
	}
	duration := 20 * time.Second
	if v := os.Getenv("ORDERAGG_CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("ORDERAGG_CHAOS_DURATION: %v", err)
		}
		duration = d
	}

	redis := miniredis.RunT(t)
	proxy := newChaosProxy(t, redis.Addr())
	// Everything the service starts must be gone once it has stopped.
	goroutinesBefore := runtime.NumGoroutine()
	const deadline = 600 * time.Millisecond
	answers := &orderSpans{}
	s, _ := startServiceEnv(t, []string{"--redis-url", "redis://" + proxy.addr() + "/0"}, func(c *config.Serve) {
		c.Deadline = deadline
		c.Reserve = 100 * time.Millisecond
		c.Dependencies.Update("order", func(x *config.Dependency) { x.Timeout = 400 * time.Millisecond })
		c.Dependencies.Update("inventory", func(x *config.Dependency) { x.Timeout = 250 * time.Millisecond })
		c.Dependencies.Update("coupon", func(x *config.Dependency) { x.Timeout = 150 * time.Millisecond })
		c.Dependencies.Update("logistics", func(x *config.Dependency) { x.Timeout = 200 * time.Millisecond })
		c.Dependencies.Update("order", func(x *config.Dependency) { x.Breaker.SleepWindow = time.Second })
		c.Dependencies.Update("logistics", func(x *config.Dependency) { x.Breaker.SleepWindow = time.Second })
		c.Dependencies.Update("cache", func(x *config.Dependency) { x.Breaker.SleepWindow = time.Second })
	}, func(e *Env) { e.SpanExporter = answers })
	maxAge := map[string]time.Duration{"order": 24 * time.Hour, "inventory": time.Minute, "coupons": 5 * time.Minute, "logistics": 30 * time.Minute}

	ctx, stop := context.WithTimeout(context.Background(), duration)
	defer stop()
	var requests, violations atomic.Int64
	statuses := make(map[int]*atomic.Int64)
	for _, st := range []int{200, 404, 503} {
		statuses[st] = new(atomic.Int64)
	}
	var mu sync.Mutex
	var firstViolations []string
	violate := func(format string, args ...any) {
		violations.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if len(firstViolations) < 10 {
			firstViolations = append(firstViolations, fmt.Sprintf(format, args...))
		}
	}

	var wg sync.WaitGroup
	// The chaos monkey: every 500 ms, new faults somewhere.
	wg.Go(func() {
		// Healthy is the most common draw, so cached answers get written
		// between the storms and every path is exercised.
		faults := []string{`{}`, `{}`, `{}`, `{}`, `{"hang":true}`, `{"error_rate":1}`, `{"error_rate":0.5}`, `{"corrupt":true}`, `{"latency_ms":100,"jitter_ms":200}`, `{"error_rate":1,"error_status":429}`}
		svcs := []string{"order", "inventory", "coupon", "logistics"}
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			svc := svcs[rand.IntN(len(svcs))]
			s.fault(svc, faults[rand.IntN(len(faults))])
			proxy.set([]proxyMode{proxyOK, proxyOK, proxyOK, proxyFrozen, proxyDown}[rand.IntN(5)])
		}
	})
	// The server itself gives up on a request at its write timeout (the
	// deadline plus 10 s): a request still unanswered then is hung, and
	// the bound turns it into a violation instead of a stuck test. How
	// fast answers come is checked below, by the service's own measure.
	client := &http.Client{Timeout: deadline + 10*time.Second}
	for w := range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				id := fmt.Sprintf("o-%d", rand.IntN(60))
				if rand.IntN(20) == 0 {
					id = fmt.Sprintf("nf-%d", w)
				}
				resp, err := client.Get("http://" + s.addrs.API + "/v1/orders/" + id)
				if err != nil {
					violate("%s: %v", id, err)
					continue
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				requests.Add(1)
				if c, ok := statuses[resp.StatusCode]; ok {
					c.Add(1)
				}
				checkAnswer(id, resp, raw, maxAge, violate)
			}
		})
	}
	wg.Wait()

	if requests.Load() == 0 {
		t.Fatal("no requests made")
	}
	// Every answer within the deadline, arrival to answer as the service
	// measures it (its server span), less the time the process was held up
	// meanwhile (timing_test.go says why). The span ends as the handler
	// returns, which can be just after the client has read the answer: wait
	// until all are in.
	var spans []interval
	waitUntil(t, func() bool { spans = answers.all(); return len(spans) >= int(requests.Load()) })
	late, excused, latest := 0, 0, time.Duration(0)
	for _, sp := range spans {
		took := sp.to.Sub(sp.from)
		if took <= deadline {
			continue
		}
		late++
		if held := s.stalls.heldUp(sp.from, sp.to); took-held > deadline {
			violate("answered after %v by the service's measure, deadline %v, while the process was held up only %v", took, deadline, held)
			continue
		}
		excused++
		latest = max(latest, took)
	}

	t.Logf("chaos: %v, %d requests (200: %d, 404: %d, 503: %d), %d invariant violations",
		duration, requests.Load(), statuses[200].Load(), statuses[404].Load(), statuses[503].Load(), violations.Load())
	t.Logf("server-side: %d answers, %d after the %v deadline, %d of those by no more than the process was held up meanwhile (the latest after %v)",
		len(spans), late, deadline, excused, latest)
	for _, v := range firstViolations {
		t.Error(v)
	}

	// Afterwards: healthy again, nothing left running inside a request.
	s.do(http.MethodDelete, "http://"+s.addrs.Sim+"/faults", "", nil)
	proxy.set(proxyOK)
	waitUntil(t, func() bool {
		for _, d := range s.get("/v1/resilience").body["dependencies"].([]any) {
			if d.(map[string]any)["bulkhead"].(map[string]any)["in_use"].(float64) != 0 {
				return false
			}
		}
		return true
	})
	waitUntil(t, func() bool {
		return !goroutineInside("internal/orderdetail.(*Aggregator)", "internal/resilience.", "handlers.(*orders)")
	})
	client.CloseIdleConnections()
	// And once the service has stopped, every goroutine it started (servers,
	// pools, cache writers, simulators) has ended.
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	var goroutines int
	waitUntil(t, func() bool { goroutines = runtime.NumGoroutine(); return goroutines <= goroutinesBefore })
	t.Logf("afterwards: %d goroutines (%d before)", goroutines, goroutinesBefore)
}

func goroutineInside(frames ...string) bool {
	buf := make([]byte, 4<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		for _, f := range frames {
			if strings.Contains(g, f) {
				return true
			}
		}
	}
	return false
}

type chaosSection struct {
	Source   string    `json:"source"`
	Degraded bool      `json:"degraded"`
	Reason   string    `json:"reason"`
	AsOf     time.Time `json:"as_of"`
	Status   string    `json:"status"`
	Data     *struct {
		ID    string `json:"id"`
		Items []struct {
			SKU string `json:"sku"`
		} `json:"items"`
	} `json:"data"`
	Items []struct {
		SKU       string          `json:"sku"`
		Available json.RawMessage `json:"available"`
		Status    string          `json:"status"`
	} `json:"items"`
}

// checkAnswer holds one answer to the contract; the simulators' data are a
// function of the id, so live and cached content can be checked exactly.
func checkAnswer(id string, resp *http.Response, raw []byte, maxAge map[string]time.Duration, violate func(string, ...any)) {
	nf := strings.HasPrefix(id, "nf-")
	switch resp.StatusCode {
	case 200:
		if nf {
			violate("%s: 200 for an order that does not exist", id)
			return
		}
	case 404:
		if !nf {
			violate("%s: 404 for an existing order", id)
		}
		return
	case 503:
		if resp.Header.Get("Retry-After") == "" {
			violate("%s: 503 without Retry-After", id)
		}
		return
	default:
		violate("%s: status %d", id, resp.StatusCode)
		return
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		violate("%s: invalid JSON: %v", id, err)
		return
	}
	var page struct {
		OrderID  string `json:"order_id"`
		Degraded bool   `json:"degraded"`
	}
	json.Unmarshal(raw, &page)
	sections := map[string]chaosSection{}
	anyDegraded := false
	for _, name := range []string{"order", "inventory", "coupons", "logistics"} {
		var s chaosSection
		if err := json.Unmarshal(top[name], &s); err != nil {
			violate("%s: section %s: %v", id, name, err)
			return
		}
		sections[name] = s
		anyDegraded = anyDegraded || s.Degraded
		switch s.Source {
		case "live":
			if s.Degraded || s.Reason != "" || !s.AsOf.IsZero() {
				violate("%s: live %s marked %+v", id, name, s)
			}
		case "cache":
			age := time.Since(s.AsOf)
			if !s.Degraded || s.Reason == "" || s.AsOf.IsZero() || age > maxAge[name] || age < -time.Second {
				violate("%s: cached %s: degraded=%v reason=%q as_of=%v", id, name, s.Degraded, s.Reason, s.AsOf)
			}
		case "fallback":
			if !s.Degraded || s.Reason == "" || name == "order" {
				violate("%s: fallback %s: %+v", id, name, s)
			}
		default:
			violate("%s: %s source %q", id, name, s.Source)
		}
	}
	if page.OrderID != id || page.Degraded != anyDegraded {
		violate("%s: order_id %q degraded %v (sections say %v)", id, page.OrderID, page.Degraded, anyDegraded)
	}
	if (resp.Header.Get("Cache-Control") == "no-store") != page.Degraded {
		violate("%s: Cache-Control %q on a page degraded=%v", id, resp.Header.Get("Cache-Control"), page.Degraded)
	}
	want := sim.OrderFor(id)
	order := sections["order"]
	if order.Data == nil || order.Data.ID != id || len(order.Data.Items) != len(want.Items) {
		violate("%s: order data does not match the order service's", id)
		return
	}
	stock := sim.StockFor(id)
	inv := sections["inventory"]
	if len(inv.Items) != len(want.Items) {
		violate("%s: inventory lists %d items for %d order items", id, len(inv.Items), len(want.Items))
		return
	}
	for i, it := range inv.Items {
		if it.SKU != want.Items[i].SKU {
			violate("%s: inventory SKU %q, order has %q", id, it.SKU, want.Items[i].SKU)
		}
		if inv.Source == "fallback" {
			if string(it.Available) != "null" || it.Status != "UNKNOWN" || inv.Status != "UNKNOWN" {
				violate("%s: fabricated stock in a fallback: %s %s", id, it.Available, it.Status)
			}
			continue
		}
		if string(it.Available) != fmt.Sprint(stock.Items[i].Available) {
			violate("%s: %s available %s, the inventory service says %d", id, it.SKU, it.Available, stock.Items[i].Available)
		}
	}
	if c := sections["coupons"]; c.Source == "fallback" && len(c.Items) != 0 {
		violate("%s: fallback coupons not empty", id)
	}
	if l := sections["logistics"]; l.Source == "fallback" && l.Status != "UNKNOWN" {
		violate("%s: fallback logistics status %q", id, l.Status)
	}
}

// chaosProxy sits between the service and Redis and can pass traffic,
// freeze it (connections stay open, nothing moves: a stalled Redis), or cut
// it (connections reset: a Redis that is gone).
type chaosProxy struct {
	ln     net.Listener
	target string
	mode   atomic.Int32
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

type proxyMode int32

const (
	proxyOK proxyMode = iota
	proxyFrozen
	proxyDown
)

func newChaosProxy(t *testing.T, target string) *chaosProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &chaosProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

func (p *chaosProxy) addr() string { return p.ln.Addr().String() }

func (p *chaosProxy) set(m proxyMode) {
	p.mode.Store(int32(m))
	if m == proxyDown {
		p.closeAll()
	}
}

func (p *chaosProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
}

func (p *chaosProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *chaosProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if proxyMode(p.mode.Load()) == proxyDown {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.track(client)
		p.track(server)
		p.wg.Go(func() { p.pipe(client, server) })
		p.wg.Go(func() { p.pipe(server, client) })
	}
}

// pipe copies src to dst, holding the bytes while frozen.
func (p *chaosProxy) pipe(src, dst net.Conn) {
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		for proxyMode(p.mode.Load()) == proxyFrozen {
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}
