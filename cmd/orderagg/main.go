// Command orderagg serves an order-detail page under a hard deadline when the
// services behind it are slow, failing or gone. `orderagg --help` lists its
// commands, `orderagg <command> --help` their flags.
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
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/orderagg/orderagg/internal/app"
	"github.com/orderagg/orderagg/internal/config"
)

// version is set at build time (-ldflags "-X main.version=…").
var version = "dev"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

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

// run is main without the exit: it returns the exit status (1 for a
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

// healthcheck exits 0 when GET --url answers 200 within --timeout, 1 when
// not, and 2 for a bad flag: the container image has no shell or curl.
func healthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const prefix = config.EnvPrefix + "HEALTHCHECK_" // ORDERAGG_URL is the load tool's
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
	} else if bad := config.CheckURL(*url, []string{"http", "https"}, true); err == nil && bad != nil {
		err = fmt.Errorf("--url (%s): %w", config.EnvName(prefix, "url"), bad)
	}
	if err != nil {
		fmt.Fprintf(stderr, "orderagg healthcheck: %v\n", err)
		return 2
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil) // a valid URL
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
	host, port, _ := net.SplitHostPort(cmp.Or(addr, "127.0.0.1:8080"))
	if host == "" || net.ParseIP(host).IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
