package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/orderagg/orderagg/internal/handlers"
)

// program is what a running program owns: the close stack of everything
// it opened, and its HTTP servers, the first of which to stop by itself
// says so on failed (buffered, of one).
type program struct {
	logger   *slog.Logger
	allowed  []string      // --allowed-hosts
	deadline time.Duration // a request's budget; its answer gets 10s more to be written
	// readHeader cuts off a client that dawdles over its headers; 0 means 5s.
	readHeader time.Duration
	closers    closeStack
	failed     chan error
}

// server is an http.Server whose Shutdown also waits for the goroutine
// that runs it.
type server struct {
	*http.Server
	addr string // the address it listens on
	wg   sync.WaitGroup
}

// serve listens on addr and serves the handler build makes around the
// listener's host guard, until the close stack shuts it down. Request
// headers are limited to 64 KiB (net/http allows 4 KiB beyond
// MaxHeaderBytes; 431 past it). The server's own errors are logged at WARN.
func (p *program) serve(name, addr string, build func(*handlers.HostGuard) http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	logger := p.logger.With("server", name)
	srv := &server{addr: ln.Addr().String(), Server: &http.Server{
		Handler:           build(handlers.NewHostGuard(ln.Addr(), p.allowed)),
		ReadHeaderTimeout: cmp.Or(p.readHeader, 5*time.Second),
		ReadTimeout:       max(10*time.Second, p.readHeader),
		WriteTimeout:      p.deadline + 10*time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64<<10 - 4096,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}}
	srv.wg.Go(func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server stopped", "addr", srv.addr, "err", err)
			select {
			case p.failed <- fmt.Errorf("%s server: %w", name, err):
			default: // another one said it first
			}
		}
	})
	p.closers.push(name+" server", srv.Shutdown)
	return srv, nil
}

// Shutdown stops accepting, waits for requests in flight (bounded by ctx,
// after which the rest are cut) and for the serving goroutine.
func (s *server) Shutdown(ctx context.Context) error {
	err := s.Server.Shutdown(ctx)
	if err != nil {
		s.Server.Close()
	}
	s.wg.Wait()
	return err
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
