// Command orderagg-loadtest drives load at a running orderagg and prints
// throughput, latency percentiles and the degraded/error mix; with
// --scenario it runs one of the in-process experiments of
// docs/experiments.md instead. It is tooling, kept out of the service
// binary: cmd/orderagg never imports it.
//
// Every flag has an ORDERAGG_* environment twin; --help lists them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/orderagg/orderagg/cmd/orderagg-loadtest/internal/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := loadtest.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
