package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheck asks a running service whether it is ready and exits 0 if it
// is. The container image has no shell or curl, so this is what its
// HEALTHCHECK and compose's health checks run.
func healthcheck(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := "http://" + loopback(getenv("ORDERAGG_ADDR")) + "/readyz"
	if v := getenv("ORDERAGG_HEALTHCHECK_URL"); v != "" {
		def = v
	}
	url := fs.String("url", def, "URL to GET; 200 means healthy (env ORDERAGG_HEALTHCHECK_URL; default from ORDERAGG_ADDR)")
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
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
		fmt.Fprintf(stderr, "orderagg healthcheck: %s answered %d\n", *url, resp.StatusCode)
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
