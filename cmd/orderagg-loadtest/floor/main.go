// Command floor serves the bare aggregator that orderagg's experiments
// measure against (cmd/orderagg-loadtest/internal/loadtest/floor): the four downstream calls in
// parallel with plain net/http — no per-call timeouts, bulkheads, breaker,
// cache or fallbacks — answering the contract's page shape when every call
// succeeds, 502 when one fails and 504 at the deadline. It exists so the
// comparison in docs/experiments.md can be repeated by hand, out of process:
//
//	orderagg sim --addr 127.0.0.1:9100 &
//	go run ./cmd/orderagg-loadtest/floor --addr 127.0.0.1:8090 --downstream-url http://127.0.0.1:9100 &
//	orderagg-loadtest --url http://127.0.0.1:8090
//
// It is benchmark equipment, not a product: it lives beside the load tool,
// so the service binary never links it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/orderagg/orderagg/cmd/orderagg-loadtest/internal/loadtest/floor"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address")
	down := flag.String("downstream-url", "http://127.0.0.1:9100", "base URL of the four downstreams (an `orderagg sim`)")
	deadline := flag.Duration("deadline", 1500*time.Millisecond, "the page's whole budget")
	attempts := flag.Int("attempts", 1, "attempts per downstream call; more than 1 is the naive retry loop")
	flag.Parse()
	if err := run(*addr, floor.Config{BaseURL: *down, Deadline: *deadline, Attempts: *attempts}); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

func run(addr string, c floor.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f := floor.New(c)
	defer f.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Printf("floor: serving on %s, downstreams at %s", ln.Addr(), c.BaseURL)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
