package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// redisServer is a redis-server child process serving an experiment's
// last-good cache.
type redisServer struct {
	url     string
	version string
	cmd     *exec.Cmd
	done    chan struct{}
}

// startRedisServer starts the redis-server found on PATH on a free loopback
// port, without persistence, and waits until it answers PING. The
// experiments use one when --redis-url is not given: a deployment keeps its
// cache in a Redis server, out of process, and the embedded one runs inside
// orderagg's own process — CPU the service would not spend in production
// (1.05–1.07× the CPU per page of the two processes together, see the
// embedded scenario). errNoRedisServer means there is none to start.
func startRedisServer(ctx context.Context) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoRedisServer
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "orderagg-loadtest-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	r := &redisServer{url: "redis://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: make(chan struct{})}
	go func() { // reaps the child; stop waits for it
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
		close(r.done)
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := pingRedis(addr)
		if err == nil {
			r.version = v
			return r, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer: %w", addr, err)
		}
		select {
		case <-r.done:
			return nil, fmt.Errorf("redis-server exited at start (port %d)", port)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

var errNoRedisServer = errors.New("no redis-server on PATH")

// stop ends the server and waits for it to exit.
func (r *redisServer) stop() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// pingRedis sends PING and INFO server, and returns the server's version.
func pingRedis(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\nINFO server\r\n")); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return "", fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	if _, err := br.ReadString('\n'); err != nil { // $<length> of the INFO bulk string
		return "", err
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "unknown", nil
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
		if strings.TrimSpace(line) == "" {
			return "unknown", nil
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
