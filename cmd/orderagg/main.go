// Command orderagg serves an order-detail page under a hard deadline when the
// services behind it are slow, failing or gone. `orderagg --help` lists its
// commands, `orderagg <command> --help` their flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/orderagg/orderagg/internal/app"
	"github.com/orderagg/orderagg/internal/config"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `Usage: orderagg [command] [flags]

Commands:
  serve        the order-detail service (the default when no command is given)
  sim          the four simulated downstream services on one address, with fault injection
  healthcheck  exit 0 when a running service answers /readyz with 200 (for containers)
  version      print the build's version
  help         print this text

Every flag has an ORDERAGG_* environment twin; the flag wins.
Run 'orderagg <command> --help' for the flags of a command.
`

// run is main without the exit: it returns the exit status (0, 1 for a
// failure, 2 for a usage error). SIGINT and SIGTERM end the command;
// SIGHUP reloads serve's --config file.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	switch {
	case len(args) == 0:
	case slices.Contains([]string{"-h", "-help", "--help"}, args[0]):
		cmd = "help" // the command list, not serve's flags
	case args[0] == "--version":
		cmd = "version"
	case !strings.HasPrefix(args[0], "-"):
		cmd, args = args[0], args[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	printUsage := config.ServeUsage
	switch cmd {
	case "serve":
		var cfg config.Serve
		if cfg, err = config.ParseServe(args); err == nil {
			hup := make(chan os.Signal, 1) // one pending reload stands for any more
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			err = app.Serve(ctx, cfg, app.Env{Stderr: stderr, Reload: hup, Version: version})
		}
	case "sim":
		var cfg config.Sim
		if cfg, err = config.ParseSim(args); err == nil {
			err = app.RunSim(ctx, cfg, app.Env{Stderr: stderr})
		}
		printUsage = config.SimUsage
	case "healthcheck":
		return healthcheck(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "orderagg", version)
		return 0
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "orderagg: unknown command %q\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "orderagg %s: %v\n", cmd, err)
	if errors.Is(err, config.ErrUsage) {
		return 2
	}
	return 1
}
