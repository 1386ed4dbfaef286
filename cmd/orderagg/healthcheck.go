package main

import (
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
// is. The container image has no shell or curl, so this is what its
// HEALTHCHECK and compose's health checks run.
func healthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	url := "http://" + loopback(os.Getenv("ORDERAGG_ADDR")) + "/readyz"
	timeout := 2 * time.Second
	// The variables are ORDERAGG_HEALTHCHECK_*: ORDERAGG_URL is the load
	// tool's, and a service's environment may set ORDERAGG_TIMEOUT-like names.
	const prefix = config.EnvPrefix + "HEALTHCHECK_"
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&url, "url", url, "`URL` to GET; 200 means healthy (default: /readyz at ORDERAGG_ADDR)")
	fs.DurationVar(&timeout, "timeout", timeout, "how long to wait for the answer")
	err := config.Parse(fs, args, prefix, true)
	if errors.Is(err, flag.ErrHelp) {
		config.PrintUsage(stdout, fs, prefix, "orderagg healthcheck [--url URL] [--timeout duration]", "Exits 0 when a running service answers 200.")
		return 0
	}
	if err == nil && timeout <= 0 {
		err = fmt.Errorf("--timeout (%s): must be positive, got %v", config.EnvName(prefix, "timeout"), timeout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "orderagg healthcheck: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "orderagg healthcheck: --url: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "orderagg healthcheck: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "orderagg healthcheck: %s answered %d\n", url, resp.StatusCode)
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}

// loopback turns a listen address (":8080", "0.0.0.0:8080", "") into one to
// dial on this host.
func loopback(addr string) string {
	if addr == "" {
		return "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
