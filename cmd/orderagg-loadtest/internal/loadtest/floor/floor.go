// Package floor is the bare aggregator that orderagg's experiments measure
// it against: the same four downstream calls in parallel, with plain
// net/http and nothing else — no per-call timeout (only the page deadline),
// no bulkhead, no breaker, no last-good cache, no fallback. A failed call
// fails the page (502), a call still running at the deadline fails it with
// 504. What orderagg costs on a healthy day, and what it saves on a bad one,
// is the difference between the two.
//
// It is test and benchmark equipment, never part of the service:
// `orderagg-loadtest --scenario …` serves it in-process, and
// cmd/orderagg-loadtest/floor runs it as a program to load by hand.
package floor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/orderagg/orderagg/internal/downstream"
)

// Config sets up the floor.
type Config struct {
	// BaseURL serves all four downstreams (an `orderagg sim`).
	BaseURL string
	// Deadline is the page's whole budget. Default 1500ms, orderagg's.
	Deadline time.Duration
	// Attempts per downstream call: 1 (the default) never retries; more
	// retries a failed call at once, up to that many attempts in all — the
	// naive retry loop orderagg's retry budget exists to prevent.
	Attempts int
	// Client sends the calls. Default: a plain transport that keeps enough
	// idle connections for heavy concurrency (net/http's default of 2 per
	// host would make the floor pay for connection churn, not for its
	// missing resilience).
	Client *http.Client
}

// New returns the floor: GET /v1/orders/{id} and GET /healthz. Close
// releases its idle connections when done.
func New(c Config) *Floor {
	if c.Deadline <= 0 {
		c.Deadline = 1500 * time.Millisecond
	}
	if c.Attempts < 1 {
		c.Attempts = 1
	}
	if c.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 0
		tr.MaxIdleConnsPerHost = 1024
		c.Client = &http.Client{Transport: tr}
	}
	f := &Floor{cfg: c, base: strings.TrimSuffix(c.BaseURL, "/"), mux: http.NewServeMux()}
	f.mux.HandleFunc("GET /v1/orders/{id}", f.page)
	f.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`)
	})
	return f
}

// Floor is the bare aggregator's handler.
type Floor struct {
	cfg  Config
	base string
	mux  *http.ServeMux
}

// ServeHTTP implements http.Handler.
func (f *Floor) ServeHTTP(w http.ResponseWriter, r *http.Request) { f.mux.ServeHTTP(w, r) }

// Close closes the client's idle connections.
func (f *Floor) Close() { f.cfg.Client.CloseIdleConnections() }

// The downstreams' wire formats, only as far as the page needs them.
type (
	wireStock struct {
		Items []struct {
			SKU       string `json:"sku"`
			Available int    `json:"available"`
		} `json:"items"`
	}
	wireCoupons struct {
		Coupons []downstream.Coupon `json:"coupons"`
	}
)

// livePage is the contract's page with every section live.
type livePage struct {
	OrderID  string `json:"order_id"`
	Degraded bool   `json:"degraded"`
	Order    struct {
		Source   string           `json:"source"`
		Degraded bool             `json:"degraded"`
		Data     downstream.Order `json:"data"`
	} `json:"order"`
	Inventory struct {
		Source   string `json:"source"`
		Degraded bool   `json:"degraded"`
		downstream.Inventory
	} `json:"inventory"`
	Coupons struct {
		Source   string `json:"source"`
		Degraded bool   `json:"degraded"`
		downstream.Coupons
	} `json:"coupons"`
	Logistics struct {
		Source   string `json:"source"`
		Degraded bool   `json:"degraded"`
		downstream.Logistics
	} `json:"logistics"`
}

// errNotFound is the order service's 404.
var errNotFound = errors.New("order not found")

func (f *Floor) page(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), f.cfg.Deadline)
	defer cancel()
	id := r.PathValue("id")

	var (
		p    livePage
		wg   sync.WaitGroup
		errs [4]error
	)
	p.OrderID = id
	var stock wireStock
	var coupons wireCoupons
	calls := []struct {
		path string
		into any
	}{
		{"/order/v1/orders/" + id, &p.Order.Data},
		{"/inventory/v1/orders/" + id + "/stock", &stock},
		{"/coupon/v1/orders/" + id + "/coupons", &coupons},
		{"/logistics/v1/orders/" + id + "/shipment", &p.Logistics.Logistics},
	}
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.call(ctx, c.path, c.into)
		}()
	}
	wg.Wait()

	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, errNotFound):
			writeError(w, http.StatusNotFound, "ORDER_NOT_FOUND", err.Error())
			return
		case ctx.Err() != nil:
			writeError(w, http.StatusGatewayTimeout, "DEADLINE", err.Error())
			return
		default:
			writeError(w, http.StatusBadGateway, "UPSTREAM_FAILED", err.Error())
			return
		}
	}
	p.Order.Source, p.Inventory.Source, p.Coupons.Source, p.Logistics.Source = "live", "live", "live", "live"
	p.Inventory.Status = downstream.InventoryConfirmed
	p.Inventory.Items = make([]downstream.StockItem, len(stock.Items))
	for i, it := range stock.Items {
		n := it.Available
		st := downstream.StockInStock
		switch {
		case n <= 0:
			st = downstream.StockOutOfStock
		case n <= 5:
			st = downstream.StockLow
		}
		p.Inventory.Items[i] = downstream.StockItem{SKU: it.SKU, Available: &n, Status: st}
	}
	p.Coupons.Items = coupons.Coupons
	if p.Coupons.Items == nil {
		p.Coupons.Items = []downstream.Coupon{}
	}
	body, err := json.Marshal(&p)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// call GETs path and decodes a 200 body into into, trying up to Attempts
// times in a row on any failure.
func (f *Floor) call(ctx context.Context, path string, into any) error {
	var err error
	for range f.cfg.Attempts {
		if err = f.once(ctx, path, into); err == nil || errors.Is(err, errNotFound) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

func (f *Floor) once(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := f.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return err
	case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(path, "/order/"):
		return fmt.Errorf("%w: %s", errNotFound, path)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	}
	return json.Unmarshal(body, into)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]map[string]string{"error": {"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
