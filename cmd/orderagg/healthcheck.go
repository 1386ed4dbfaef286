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

// healthcheck exits 0 if a running service answers its readiness probe
// with 200, 1 if not, 2 for bad flags: the container image has no shell or
// curl for its health checks.
func healthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// Its own prefix: ORDERAGG_URL is the load tool's.
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
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
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
	resp, err := http.DefaultClient.Do(req)
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
