// Package sim serves orderagg's simulated downstream services on one
// address with fault injection (contract §1, "sim"). Each service, in a
// file of its own, answers GET on its path with JSON that is a
// deterministic function of the order id; an "nf-" id is 404. Its errors
// are {"error":{"code","message"}}. A client may send X-Budget-Ms, the
// milliseconds it will still wait: an injected wait that would outlast it
// ends then with 504 BUDGET_EXHAUSTED, keeping the connection usable.
package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HeaderBudget carries the client's remaining budget in whole milliseconds.
const HeaderBudget = "X-Budget-Ms"

// A service is one simulated downstream, registered from its own file.
type service struct {
	name   string              // in the fault API and /stats
	path   string              // its GET route, with {id} for the order id
	answer func(id string) any // its 200 body for an order that exists
}

var services = map[string]service{}

func register(s service) { services[s.name] = s }

// Services returns the names of the simulated services, sorted.
func Services() []string { return slices.Sorted(maps.Keys(services)) }

// Server is the simulated services and their fault API, as one
// http.Handler; build it with New. It is safe for concurrent use.
type Server struct {
	mux      *http.ServeMux
	log      *slog.Logger
	requests map[string]*atomic.Int64 // fixed keys: read without a lock
	closing  context.Context
	close    context.CancelFunc

	mu     sync.Mutex
	faults map[string]Fault
	rng    *rand.Rand // a fixed seed: a run's error and jitter draws repeat
}

// Option configures a Server.
type Option func(*Server)

// WithLogger sets the logger of fault changes; by default nothing is logged.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns a simulator whose services are all healthy, beside the
// fault API: PUT, GET and DELETE /faults/{service} (a Fault; the answer is
// the fault in force), GET and DELETE /faults (all, by service) and GET
// /stats. An unknown service or a malformed body is 400, changing nothing.
func New(opts ...Option) *Server {
	s := &Server{mux: http.NewServeMux(), log: slog.New(slog.DiscardHandler),
		requests: map[string]*atomic.Int64{}, faults: map[string]Fault{}, rng: rand.New(rand.NewPCG(1, 2))}
	for _, o := range opts {
		o(s)
	}
	s.closing, s.close = context.WithCancel(context.Background())
	for name, svc := range services {
		s.faults[name], s.requests[name] = healthy, new(atomic.Int64)
		s.mux.HandleFunc("GET "+svc.path, func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, svc) })
	}
	s.mux.HandleFunc("GET /faults", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Faults()) })
	s.mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, _ *http.Request) {
		s.ResetFaults()
		writeJSON(w, http.StatusOK, s.Faults())
	})
	for _, method := range []string{"GET", "PUT", "DELETE"} {
		s.mux.HandleFunc(method+" /faults/{service}", s.serveFault)
	}
	s.mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) })
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends every injected wait, and every later one, at once with 503
// SHUTTING_DOWN; requests that do not wait are still served. It is
// idempotent and suits http.Server.RegisterOnShutdown.
func (s *Server) Close() { s.close() }

// SetFault sets service's fault, a zero ErrorStatus meaning
// DefaultErrorStatus. An error wraps ErrUnknownService or ErrInvalidFault,
// and then nothing changed.
func (s *Server) SetFault(service string, f Fault) error {
	if _, ok := services[service]; !ok {
		return fmt.Errorf("%w %q: want one of %s", ErrUnknownService, service, strings.Join(Services(), ", "))
	}
	f, err := f.normalize()
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.faults[service] = f
	s.mu.Unlock()
	s.log.Info("sim fault set", "service", service, "fault", f)
	return nil
}

// ResetFaults makes every service healthy.
func (s *Server) ResetFaults() {
	for name := range services {
		_ = s.SetFault(name, healthy)
	}
}

// Faults returns the faults in force, by service.
func (s *Server) Faults() map[string]Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.faults)
}

// ServiceStats counts one service's requests, whatever became of them.
type ServiceStats struct {
	Requests int64 `json:"requests"`
}

// Stats returns each service's counters, by service.
func (s *Server) Stats() map[string]ServiceStats {
	out := make(map[string]ServiceStats, len(s.requests))
	for name, n := range s.requests {
		out[name] = ServiceStats{Requests: n.Load()}
	}
	return out
}

// serve answers one request to svc: after the delay, an injected error,
// else 404 for an nf- id, else the body (its first half when corrupt).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, svc service) {
	s.requests[svc.name].Add(1)
	s.mu.Lock()
	f, jitter, chance := s.faults[svc.name], s.rng.Float64(), s.rng.Float64()
	s.mu.Unlock()
	if !s.delay(w, r, f, jitter) {
		return
	}
	switch id := r.PathValue("id"); {
	case chance < f.ErrorRate:
		writeError(w, f.ErrorStatus, "INJECTED_FAULT", "injected fault of the "+svc.name+" service")
	case strings.HasPrefix(id, "nf-"):
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("order %q does not exist", id))
	default:
		b, _ := json.Marshal(svc.answer(id)) // plain data: cannot fail
		if f.Corrupt {
			b = b[:len(b)/2] // a proper prefix of a JSON object is never JSON
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}
}

// delay waits out f — a hang until the client goes away, else the latency
// plus jitter (0..1) of the jitter — cut short by the client's budget
// (504) or by Close (503). It reports whether to go on and answer.
func (s *Server) delay(w http.ResponseWriter, r *http.Request, f Fault, jitter float64) bool {
	if !f.Hang && f.LatencyMS == 0 && f.JitterMS == 0 {
		return true
	}
	d := time.Duration((float64(f.LatencyMS) + jitter*float64(f.JitterMS)) * float64(time.Millisecond))
	if f.Hang {
		d = math.MaxInt64
	}
	// X-Budget-Ms: a missing, malformed or negative value is no budget, one
	// over a day is a day.
	late := false
	if ms, err := strconv.ParseInt(strings.TrimSpace(r.Header.Get(HeaderBudget)), 10, 64); err == nil && ms >= 0 {
		budget := time.Duration(min(ms, 24*3600*1000)) * time.Millisecond
		d, late = min(d, budget), budget <= d
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	case <-s.closing.Done():
	}
	switch {
	case s.closing.Err() != nil:
		writeError(w, http.StatusServiceUnavailable, "SHUTTING_DOWN", "the simulator is shutting down")
	case r.Context().Err() != nil: // nobody to answer
	case late:
		writeError(w, http.StatusGatewayTimeout, "BUDGET_EXHAUSTED", fmt.Sprintf("the client's budget of %v ran out", d))
	default:
		return true
	}
	return false
}

// serveFault answers /faults/{service} with the fault in force afterwards.
func (s *Server) serveFault(w http.ResponseWriter, r *http.Request) {
	name, f, err := r.PathValue("service"), healthy, error(nil)
	if r.Method == http.MethodPut {
		f, err = decodeFault(r.Body)
	}
	if _, ok := services[name]; !ok {
		writeError(w, http.StatusBadRequest, "UNKNOWN_SERVICE", fmt.Sprintf("unknown service %q: want one of %s", name, strings.Join(Services(), ", ")))
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_FAULT", err.Error())
		return
	}
	if r.Method != http.MethodGet {
		_ = s.SetFault(name, f) // a known service and a checked fault
	}
	writeJSON(w, http.StatusOK, s.Faults()[name])
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v) // plain data: cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// gen returns the random numbers of one kind of answer for one key (an
// order id, a SKU): the same in every run.
func gen(kind, key string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(kind + "\x00" + key))
	return rand.New(rand.NewPCG(h.Sum64(), 0))
}

func between(g *rand.Rand, lo, hi int) int { return lo + g.IntN(hi-lo+1) } // in [lo, hi]

func pick[T any](g *rand.Rand, xs []T) T { return xs[g.IntN(len(xs))] }
