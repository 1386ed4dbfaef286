package app

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/orderagg/orderagg/build/testenv"
	"github.com/orderagg/orderagg/internal/config"
)

// TestDashboardEndToEnd is what the README promises a new user: the real
// service in embedded demo mode, its own /dashboard in a real browser, a
// dependency broken from the page's own controls, and the breaker seen
// opening on the page — with real traffic through the real aggregation.
func TestDashboardEndToEnd(t *testing.T) {
	chromium := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	if chromium == "" {
		testenv.Missing(t, "no chromium on PATH: apt-get install chromium (make deps) to run the browser test")
	}

	s, _ := startService(t, nil, func(c *config.Serve) {
		c.Dependencies.Update("logistics", func(x *config.Dependency) { x.Breaker.MinRequests = 5 })
		c.Dependencies.Update("logistics", func(x *config.Dependency) { x.Breaker.SleepWindow = time.Minute }) // stays open once open
	})
	// A visitor's worth of traffic: 25 pages a second until the test ends.
	ctx, stopTraffic := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stopTraffic(); wg.Wait() })
	wg.Go(func() {
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/v1/orders/o-%d", s.addrs.API, i%50), nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	})

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromium),
			chromedp.NoSandbox, // the tests run as root
			chromedp.Headless,
			chromedp.DisableGPU,
			chromedp.WindowSize(1280, 800),
		)...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx); err != nil { // start the browser without a time limit
		t.Fatalf("starting %s: %v", chromium, err)
	}
	step := func(what string, limit time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(bctx, limit)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	step("loading the dashboard", 15*time.Second, chromedp.Navigate("http://"+s.addrs.API+"/dashboard"))
	var tiles []chromedp.Action[chromedp.Void]
	for _, dep := range []string{"order", "inventory", "coupon", "logistics", "cache"} {
		tiles = append(tiles, chromedp.WaitVisible(chromedp.CSS(`[data-dep="`+dep+`"] [data-role="breaker"][data-state="CLOSED"]`)))
	}
	step("a CLOSED tile per dependency", 15*time.Second, tiles...)
	step("breaking logistics from the page", 10*time.Second,
		chromedp.Click(chromedp.CSS(`[data-dep="logistics"] [data-role="fault-break"]`)))
	step("the logistics breaker opening on the page", 15*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`[data-dep="logistics"] [data-role="breaker"][data-state="OPEN"]`)))

	// The page told the truth: the service's own snapshot agrees, and pages
	// are served with logistics short-circuited.
	if got := depState(s, "logistics")["breaker"]; got != "OPEN" {
		t.Fatalf("/v1/resilience says logistics is %v", got)
	}
	if got := sec(s.get("/v1/orders/o-1"), "logistics")["reason"]; got != "SHORT_CIRCUITED" {
		t.Fatalf("logistics reason %v, want SHORT_CIRCUITED", got)
	}
}
