package floor_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orderagg/orderagg/cmd/orderagg-loadtest/internal/loadtest/floor"
	"github.com/orderagg/orderagg/internal/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup serves a simulator and the floor in front of it.
func setup(t *testing.T, c floor.Config) (*sim.Server, string) {
	t.Helper()
	s := sim.New()
	simSrv := httptest.NewServer(s)
	c.BaseURL = simSrv.URL
	f := floor.New(c)
	fSrv := httptest.NewServer(f)
	t.Cleanup(func() {
		fSrv.Close()
		f.Close()
		s.Close()
		simSrv.Close()
	})
	return s, fSrv.URL
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestServesTheContractShapeWithEverySectionLive(t *testing.T) {
	_, url := setup(t, floor.Config{})
	code, body := get(t, url+"/v1/orders/o-42")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var p struct {
		OrderID  string `json:"order_id"`
		Degraded *bool  `json:"degraded"`
		Order    struct {
			Source string `json:"source"`
			Data   struct {
				ID    string `json:"id"`
				Items []any  `json:"items"`
			} `json:"data"`
		} `json:"order"`
		Inventory struct {
			Source string `json:"source"`
			Status string `json:"status"`
			Items  []struct {
				SKU       string `json:"sku"`
				Available *int   `json:"available"`
				Status    string `json:"status"`
			} `json:"items"`
		} `json:"inventory"`
		Coupons struct {
			Source string `json:"source"`
			Items  []any  `json:"items"`
		} `json:"coupons"`
		Logistics struct {
			Source string `json:"source"`
			Status string `json:"status"`
		} `json:"logistics"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	want := sim.OrderFor("o-42")
	if p.OrderID != "o-42" || p.Degraded == nil || *p.Degraded || p.Order.Data.ID != "o-42" || len(p.Order.Data.Items) != len(want.Items) {
		t.Errorf("page %s", body)
	}
	for name, src := range map[string]string{"order": p.Order.Source, "inventory": p.Inventory.Source, "coupons": p.Coupons.Source, "logistics": p.Logistics.Source} {
		if src != "live" {
			t.Errorf("%s source %q", name, src)
		}
	}
	if p.Inventory.Status != "CONFIRMED" || len(p.Inventory.Items) != len(want.Items) || p.Inventory.Items[0].Available == nil || p.Inventory.Items[0].Status == "" {
		t.Errorf("inventory %+v", p.Inventory)
	}
	if p.Coupons.Items == nil || p.Logistics.Status == "" {
		t.Errorf("coupons %v logistics %q", p.Coupons.Items, p.Logistics.Status)
	}
	if code, _ := get(t, url+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz %d", code)
	}
}

func TestNotFoundAndFailures(t *testing.T) {
	s, url := setup(t, floor.Config{})
	if code, _ := get(t, url+"/v1/orders/nf-1"); code != http.StatusNotFound {
		t.Errorf("nf- id: %d, want 404", code)
	}
	if err := s.SetFault(sim.ServiceCoupon, sim.Fault{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	// No fallback: one failed section fails the page.
	if code, _ := get(t, url+"/v1/orders/o-1"); code != http.StatusBadGateway {
		t.Errorf("failing coupons: %d, want 502", code)
	}
}

func TestNaiveRetriesMultiplyAttempts(t *testing.T) {
	s, url := setup(t, floor.Config{Attempts: 3})
	if err := s.SetFault(sim.ServiceInventory, sim.Fault{ErrorRate: 1}); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()[sim.ServiceInventory].Requests
	get(t, url+"/v1/orders/o-1")
	if n := s.Stats()[sim.ServiceInventory].Requests - before; n != 3 {
		t.Errorf("inventory got %d attempts, want 3", n)
	}
}

func TestHangingDependencyHoldsThePageUntilTheDeadline(t *testing.T) {
	s, url := setup(t, floor.Config{Deadline: 100 * time.Millisecond})
	if err := s.SetFault(sim.ServiceLogistics, sim.Fault{Hang: true}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _ := get(t, url+"/v1/orders/o-1")
	if el := time.Since(start); code != http.StatusGatewayTimeout || el < 100*time.Millisecond {
		t.Errorf("status %d after %v, want 504 after the 100 ms deadline", code, el)
	}
}
