package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/orderagg/orderagg/internal/config"
)

// healthcheck asks a running service whether it is ready and exits 0 if it
// is, 1 if not. The container image has no shell or curl, so this is what
// its HEALTHCHECK and compose's health checks run.
func healthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// ORDERAGG_HEALTHCHECK_*: ORDERAGG_URL is the load tool's, and a
	// service's environment may set ORDERAGG_TIMEOUT-like names.
	const prefix = config.EnvPrefix + "HEALTHCHECK_"
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	url := fs.String("url", "http://"+loopback(os.Getenv("ORDERAGG_ADDR"))+"/readyz", "`URL` to GET; 200 means healthy (default: /readyz at ORDERAGG_ADDR)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	err := config.Parse(fs, args, prefix, true)
	if errors.Is(err, flag.ErrHelp) {
		config.PrintUsage(stdout, fs, prefix, "orderagg healthcheck [--url URL] [--timeout duration]", "Exits 0 when a running service answers 200.")
		return 0
	}
	if err == nil && *timeout <= 0 {
		err = fmt.Errorf("--timeout (%s): must be positive, got %v", config.EnvName(prefix, "timeout"), *timeout)
	}
	var req *http.Request
	if err == nil {
		if req, err = http.NewRequestWithContext(ctx, http.MethodGet, *url, nil); err != nil {
			err = fmt.Errorf("--url (%s): %w", config.EnvName(prefix, "url"), err)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "orderagg healthcheck: %v\n", err)
		return 2
	}
	resp, err := (&http.Client{Timeout: *timeout}).Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s answered %d", *url, resp.StatusCode)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "orderagg healthcheck: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// loopback turns a listen address (":8080", "0.0.0.0:8080", "") into one to
// dial on this host.
func loopback(addr string) string {
	host, port, err := net.SplitHostPort(cmp.Or(addr, "127.0.0.1:8080"))
	if err != nil {
		return addr
	}
	if host == "" || net.ParseIP(host).IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
