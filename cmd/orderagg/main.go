// Command orderagg serves an order-detail page under a hard deadline when the
// services behind it are slow, failing or gone.
//
//	orderagg [serve] [flags]   the order-detail service (default)
//	orderagg sim [flags]       the four simulated downstreams, with fault injection
//
// Every flag has an ORDERAGG_* environment twin; `orderagg <command> --help`
// lists them with their defaults.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/orderagg/orderagg/internal/app"
	"github.com/orderagg/orderagg/internal/config"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

const usage = `usage: orderagg [serve|sim|healthcheck|version|help] [flags]

  serve     the order-detail service (default)
  sim       the four simulated downstream services, with fault injection
  healthcheck  exit 0 when a running service answers /readyz with 200 (for containers)

Run 'orderagg <command> --help' for the flags of a command.
`

// run is main without the exit: it returns the process's exit status, so
// every deferred Close runs and tests can drive it.
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch cmd {
	case "serve":
		var cfg config.Serve
		if cfg, err = config.ParseServe(args, getenv); err == nil {
			reload := make(chan struct{}, 1)
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			forwardDone := make(chan struct{})
			defer func() { <-forwardDone }()
			fctx, cancelForward := context.WithCancel(ctx)
			defer cancelForward()
			go func() {
				defer close(forwardDone)
				forward(fctx, hup, reload)
			}()
			err = app.Serve(ctx, cfg, app.Env{Stdout: stdout, Stderr: stderr, Getenv: getenv, Reload: reload, Version: version})
		} else if errors.Is(err, flag.ErrHelp) {
			config.ServeUsage(stdout)
			return 0
		}
	case "sim":
		var cfg config.Sim
		if cfg, err = config.ParseSim(args, getenv); err == nil {
			err = app.RunSim(ctx, cfg, app.Env{Stdout: stdout, Stderr: stderr, Getenv: getenv})
		} else if errors.Is(err, flag.ErrHelp) {
			config.SimUsage(stdout)
			return 0
		}
	case "healthcheck":
		return healthcheck(ctx, args, stdout, stderr, getenv)
	case "version", "--version":
		fmt.Fprintln(stdout, "orderagg", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "orderagg: unknown command %q\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, config.ErrUsage):
		fmt.Fprintf(stderr, "orderagg %s: %v\n", cmd, err)
		return 2
	default:
		fmt.Fprintf(stderr, "orderagg %s: %v\n", cmd, err)
		return 1
	}
}

// forward turns SIGHUPs into reload requests until ctx ends; a burst of
// signals collapses into one pending reload.
func forward(ctx context.Context, sigs <-chan os.Signal, reload chan<- struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sigs:
			select {
			case reload <- struct{}{}:
			default:
			}
		}
	}
}
