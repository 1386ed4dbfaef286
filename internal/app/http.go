package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
)

// program is what a running program owns: what it opened, to close, and
// its HTTP servers, the first of which to stop by itself says so on failed
// (buffered, of one).
type program struct {
	logger     *slog.Logger
	allowed    []string      // --allowed-hosts
	deadline   time.Duration // a request's budget; its answer gets 10s more to be written
	readHeader time.Duration // how long a client may take over its headers; 0 means 5s
	closers    closeStack
	failed     chan error
}

// serve serves on addr the handler build makes around the listener's host
// guard, and returns the server and its address. The close stack stops it:
// no new requests, those in flight finish within its timeout, the rest are
// cut. Request headers over 64 KiB get 431.
func (p *program) serve(name, addr string, build func(*handlers.HostGuard) http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	logger := p.logger.With("server", name)
	srv := &http.Server{
		Handler:           build(handlers.NewHostGuard(ln.Addr(), p.allowed)),
		ReadHeaderTimeout: cmp.Or(p.readHeader, 5*time.Second),
		ReadTimeout:       max(10*time.Second, p.readHeader),
		WriteTimeout:      p.deadline + 10*time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64<<10 - 4096, // net/http allows 4 KiB beyond it
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	var serving sync.WaitGroup
	serving.Go(func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server stopped", "err", err)
			select {
			case p.failed <- fmt.Errorf("%s server: %w", name, err):
			default: // another one said it first
			}
		}
	})
	p.closers.push(name+" server", func(ctx context.Context) error {
		err := srv.Shutdown(ctx)
		if err != nil {
			srv.Close()
		}
		serving.Wait()
		return err
	})
	return srv, ln.Addr().String(), nil
}

// wait returns nil when ctx ends and the error of a server that stops by
// itself, calling reload on each value from reloads.
func (p *program) wait(ctx context.Context, reloads <-chan os.Signal, reload func()) error {
	for {
		select {
		case <-ctx.Done():
			p.logger.Info("shutting down: draining in-flight requests")
			return nil
		case err := <-p.failed:
			return err
		case <-reloads:
			reload()
		}
	}
}

// closeStack closes what was opened, last first, all within one timeout.
type closeStack []closer

type closer struct {
	name  string
	close func(context.Context) error
}

func (c *closeStack) push(name string, fn func(context.Context) error) {
	*c = append(*c, closer{name, fn})
}

func (c *closeStack) closeAll(logger *slog.Logger, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, cl := range slices.Backward(*c) {
		if err := cl.close(ctx); err != nil {
			logger.Error("shutdown step failed", "step", cl.name, "err", err)
		}
	}
	logger.Info("stopped")
}
