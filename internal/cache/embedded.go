package cache

import (
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// embeddedTick is how often the embedded server's clock is advanced, hence
// how late past its TTL an entry may still be served. The aggregation checks
// each dependency's max age itself, so a second is harmless.
const embeddedTick = time.Second

// embedded is the in-process Redis-protocol server used when no URL is given.
// miniredis only ages keys when told to, so a goroutine it owns moves its
// clock forward with real time; without it no TTL would ever expire.
type embedded struct {
	srv  *miniredis.Miniredis
	stop chan struct{}
	done chan struct{}
}

// startEmbedded starts the server on a loopback port and its clock.
func startEmbedded() (*embedded, error) {
	srv := miniredis.NewMiniRedis()
	if err := srv.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("cache: start embedded server: %w", err)
	}
	e := &embedded{srv: srv, stop: make(chan struct{}), done: make(chan struct{})}
	go e.runClock()
	return e, nil
}

// runClock advances the server's TTLs by the real time elapsed, tick by tick,
// until close.
func (e *embedded) runClock() {
	defer close(e.done)
	t := time.NewTicker(embeddedTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case now := <-t.C:
			e.srv.FastForward(now.Sub(last))
			last = now
		case <-e.stop:
			return
		}
	}
}

// addr is the server's host:port.
func (e *embedded) addr() string { return e.srv.Addr() }

// close stops the clock, waits for it, and stops the server.
func (e *embedded) close() {
	close(e.stop)
	<-e.done
	e.srv.Close()
}
