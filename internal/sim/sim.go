// Package sim serves the simulated downstreams on one address with fault
// injection (contract §1, "sim"). Each service, in a file of its own,
// answers GET on its path with JSON that is a deterministic function of the
// order id; an "nf-" id is 404. Errors are {"error":{"code","message"}}.
package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HeaderBudget carries the milliseconds the client will still wait.
const HeaderBudget = "X-Budget-Ms"

// A service is one simulated downstream, registered from its own file.
type service struct {
	name   string              // in the fault API and /stats
	path   string              // its GET route, {id} the order id
	answer func(id string) any // its 200 body
}

var services = map[string]service{}

// register serves answer(id) as JSON on GET path.
func register[T any](name, path string, answer func(id string) T) {
	services[name] = service{name, path, func(id string) any { return answer(id) }}
}

// Services returns the names of the simulated services, sorted.
func Services() []string { return slices.Sorted(maps.Keys(services)) }

// Server is the simulated services and their fault API as one
// http.Handler; build it with New. It is safe for concurrent use.
type Server struct {
	mux      *http.ServeMux
	log      *slog.Logger
	closing  context.Context
	close    context.CancelFunc
	mu       sync.Mutex
	faults   map[string]Fault
	requests map[string]int64
	rng      *rand.Rand // fixed seed: a run's error and jitter draws repeat
}

// Errors of SetFault and of the fault API.
var (
	ErrUnknownService = errors.New("sim: unknown service")
	ErrInvalidFault   = errors.New("sim: invalid fault")
)

// Limits of a Fault: latency_ms and jitter_ms, the status of an error.
const MaxDelayMS, DefaultErrorStatus = 600_000, 500

// Fault is what goes wrong with one service. The zero value is a healthy
// service, a zero ErrorStatus meaning DefaultErrorStatus.
type Fault struct {
	LatencyMS   int     `json:"latency_ms"`   // waited before every answer, 0..MaxDelayMS
	JitterMS    int     `json:"jitter_ms"`    // a uniform 0..JitterMS more, 0..MaxDelayMS
	ErrorRate   float64 `json:"error_rate"`   // the probability, 0..1, of answering ErrorStatus
	ErrorStatus int     `json:"error_status"` // 400..599
	Hang        bool    `json:"hang"`         // hold every request until the client goes away
	Corrupt     bool    `json:"corrupt"`      // answer 200 with a body that is not JSON
}

var healthy = Fault{ErrorStatus: DefaultErrorStatus} // after a reset

// normalize applies the ErrorStatus default and checks the ranges; the
// error wraps ErrInvalidFault.
func (f Fault) normalize() (Fault, error) {
	f.ErrorStatus = cmp.Or(f.ErrorStatus, DefaultErrorStatus)
	if f.LatencyMS < 0 || f.LatencyMS > MaxDelayMS || f.JitterMS < 0 || f.JitterMS > MaxDelayMS ||
		!(f.ErrorRate >= 0 && f.ErrorRate <= 1) || f.ErrorStatus < 400 || f.ErrorStatus > 599 { // NaN too
		return Fault{}, fmt.Errorf("%w: want latency_ms and jitter_ms 0..%d, error_rate 0..1, error_status 400..599; got %+v",
			ErrInvalidFault, MaxDelayMS, f)
	}
	return f, nil
}

const maxFaultBody = 16 << 10 // a PUT /faults body's bound; real ones are under 200 bytes

// decodeFault reads a PUT /faults/{service} body: one JSON object, its
// omitted or null fields keeping their defaults. Anything else (unknown
// fields, wrong types, not an object, trailing data, over 16 KiB, values
// out of range) is an error wrapping ErrInvalidFault.
func decodeFault(r io.Reader) (Fault, error) {
	dec := json.NewDecoder(io.LimitReader(r, maxFaultBody))
	dec.DisallowUnknownFields()
	f := healthy
	p := &f // null would leave f as it is; it leaves p nil instead
	err := dec.Decode(&p)
	if err == nil && p == nil {
		err = errors.New("body must be a JSON object")
	} else if _, end := dec.Token(); err == nil && end != io.EOF {
		err = errors.New("trailing data after the JSON object")
	} else if err == nil {
		return f.normalize()
	}
	return Fault{}, fmt.Errorf("%w: %v", ErrInvalidFault, err)
}

type Option func(*Server)

// WithLogger sets the logger of fault changes; by default nothing is logged.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns a simulator whose services are all healthy, with the fault
// API: PUT, GET and DELETE /faults/{service} (answering the fault in
// force), GET and DELETE /faults (all, by service), and GET /stats. An
// unknown service or a malformed body is 400 and changes nothing.
func New(opts ...Option) *Server {
	s := &Server{mux: http.NewServeMux(), log: slog.New(slog.DiscardHandler),
		requests: map[string]int64{}, faults: map[string]Fault{}, rng: rand.New(rand.NewPCG(1, 2))}
	for _, o := range opts {
		o(s)
	}
	s.closing, s.close = context.WithCancel(context.Background())
	for name, svc := range services {
		s.faults[name], s.requests[name] = healthy, 0
		s.mux.HandleFunc("GET "+svc.path, func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, svc) })
	}
	s.mux.HandleFunc("GET /faults", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Faults()) })
	s.mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, _ *http.Request) { s.ResetFaults(); writeJSON(w, http.StatusOK, s.Faults()) })
	for _, m := range []string{"GET ", "PUT ", "DELETE "} {
		s.mux.HandleFunc(m+"/faults/{service}", s.serveFault)
	}
	s.mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) })
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends every injected wait, now and later, at once with 503
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

// ServiceStats counts a service's requests, whatever became of them.
type ServiceStats struct {
	Requests int64 `json:"requests"`
}

// Stats returns each service's counters, by service.
func (s *Server) Stats() map[string]ServiceStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]ServiceStats{}
	for name, n := range s.requests {
		out[name] = ServiceStats{n}
	}
	return out
}

// serve answers one request to svc: after the fault's wait, an injected
// error, else 404 for an nf- id, else the body (its first half if corrupt).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, svc service) {
	s.mu.Lock()
	s.requests[svc.name]++
	f, jitter, chance := s.faults[svc.name], s.rng.Float64(), s.rng.Float64()
	s.mu.Unlock()
	if (f.Hang || f.LatencyMS > 0 || f.JitterMS > 0) && !s.wait(w, r, f, jitter) {
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
			b = b[:len(b)/2] // a proper prefix of a JSON object is not JSON
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}
}

// wait waits out f (a hang, else the latency plus jitter, 0..1, of the
// jitter), cut short by the client's X-Budget-Ms (504 BUDGET_EXHAUSTED),
// its leaving or Close (503), and reports whether to go on and answer. A
// missing, malformed or negative budget is none; one over a day is a day.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, f Fault, jitter float64) bool {
	d := time.Duration((float64(f.LatencyMS) + jitter*float64(f.JitterMS)) * float64(time.Millisecond))
	if f.Hang {
		d = math.MaxInt64
	}
	late := false
	if ms, err := strconv.ParseInt(strings.TrimSpace(r.Header.Get(HeaderBudget)), 10, 64); err == nil && ms >= 0 {
		budget := time.Duration(min(ms, 24*3600*1000)) * time.Millisecond
		d, late = min(d, budget), budget <= d
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		if !late {
			return true
		}
		writeError(w, http.StatusGatewayTimeout, "BUDGET_EXHAUSTED", fmt.Sprintf("the client's budget of %v ran out", d))
	case <-s.closing.Done():
		writeError(w, http.StatusServiceUnavailable, "SHUTTING_DOWN", "the simulator is shutting down")
	case <-r.Context().Done(): // nobody to answer
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
