package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HeaderBudget carries the client's remaining budget in whole milliseconds.
const HeaderBudget = "X-Budget-Ms"

// maxBudget caps a budget header so that a huge value cannot overflow a
// time.Duration.
const maxBudget = 24 * time.Hour

// Server is the four simulated services and their fault API, as one
// http.Handler. It is safe for concurrent use.
type Server struct {
	mux   *http.ServeMux
	log   *slog.Logger
	sleep func(ctx context.Context, d time.Duration) error

	mu     sync.RWMutex
	faults map[string]Fault

	rngMu sync.Mutex
	rng   *rand.Rand

	requests map[string]*atomic.Int64 // fixed keys, so reads need no lock

	// closing is cancelled by Close to release every held request; held
	// counts those requests so that Close can wait for them.
	closing context.Context
	cancel  context.CancelFunc
	holdMu  sync.Mutex
	closed  bool
	held    sync.WaitGroup
	// Test hooks, called when a request starts and stops being held.
	onHoldStart, onHoldEnd func()
}

// Option configures a Server.
type Option func(*Server)

// WithLogger sets the logger; the default discards everything.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithSeed makes the error_rate and jitter draws reproducible. By default
// they are seeded randomly.
func WithSeed(seed uint64) Option {
	return func(s *Server) { s.rng = rand.New(rand.NewPCG(seed, seed^0x5eed)) }
}

// WithSleeper replaces how injected waits happen. sleep must return nil
// after d, or ctx.Err() as soon as ctx is done. Tests use it to observe waits
// without spending them.
func WithSleeper(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(s *Server) { s.sleep = sleep }
}

// New returns a simulator whose four services are healthy.
func New(opts ...Option) *Server {
	s := &Server{
		mux:      http.NewServeMux(),
		log:      slog.New(slog.DiscardHandler),
		sleep:    sleepCtx,
		faults:   make(map[string]Fault, len(services)),
		rng:      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		requests: make(map[string]*atomic.Int64, len(services)),
	}
	for _, o := range opts {
		o(s)
	}
	s.closing, s.cancel = context.WithCancel(context.Background())
	for _, svc := range services {
		s.faults[svc] = healthy
		s.requests[svc] = new(atomic.Int64)
	}
	s.routes()
	return s
}

func (s *Server) routes() {
	svc := func(name string, body func(id string) any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { s.serveService(w, r, name, body) }
	}
	s.mux.Handle("/order/v1/orders/{id}", svc(ServiceOrder, func(id string) any { return OrderFor(id) }))
	s.mux.Handle("/inventory/v1/orders/{id}/stock", svc(ServiceInventory, func(id string) any { return StockFor(id) }))
	s.mux.Handle("/coupon/v1/orders/{id}/coupons", svc(ServiceCoupon, func(id string) any { return CouponsFor(id) }))
	s.mux.Handle("/logistics/v1/orders/{id}/shipment", svc(ServiceLogistics, func(id string) any { return ShipmentFor(id) }))
	s.mux.HandleFunc("/faults", s.handleFaults)
	s.mux.HandleFunc("/faults/{service}", s.handleFault)
	s.mux.HandleFunc("/stats", s.handleStats)
	s.mux.HandleFunc("/", s.handleUnknown)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close releases every held request (they answer 503) and waits until they
// have stopped waiting. Requests arriving later that would wait answer 503 at
// once; the others are still served. Close is idempotent and suits
// http.Server.RegisterOnShutdown.
func (s *Server) Close() {
	s.holdMu.Lock()
	s.closed = true
	s.holdMu.Unlock()
	s.cancel()
	s.held.Wait()
}

// SetFault sets service's fault. A zero ErrorStatus means DefaultErrorStatus.
// It returns an error wrapping ErrUnknownService or ErrInvalidFault, and
// then changes nothing.
func (s *Server) SetFault(service string, f Fault) error {
	if !knownService(service) {
		return fmt.Errorf("sim: set fault: %w %q", ErrUnknownService, service)
	}
	f, err := f.normalize()
	if err != nil {
		return fmt.Errorf("sim: set fault of %s: %w", service, err)
	}
	s.mu.Lock()
	s.faults[service] = f
	s.mu.Unlock()
	s.log.Info("sim fault set", "service", service, "fault", f)
	return nil
}

// ResetFaults makes all four services healthy.
func (s *Server) ResetFaults() {
	s.mu.Lock()
	for _, svc := range services {
		s.faults[svc] = healthy
	}
	s.mu.Unlock()
	s.log.Info("sim faults reset")
}

// Faults returns the faults in force, keyed by service.
func (s *Server) Faults() map[string]Fault {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.faults)
}

func (s *Server) fault(service string) Fault {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.faults[service]
}

// ServiceStats counts one service's traffic.
type ServiceStats struct {
	// Requests is every physical request to the service's paths.
	Requests int64 `json:"requests"`
}

// Stats returns each service's counters, keyed by service.
func (s *Server) Stats() map[string]ServiceStats {
	out := make(map[string]ServiceStats, len(services))
	for svc, n := range s.requests {
		out[svc] = ServiceStats{Requests: n.Load()}
	}
	return out
}

// serveService answers one request to a service: count, wait, maybe fail,
// answer. See the package doc for the order of the steps.
func (s *Server) serveService(w http.ResponseWriter, r *http.Request, service string, body func(id string) any) {
	s.requests[service].Add(1)
	id := r.PathValue("id")
	if tp := r.Header.Get("traceparent"); tp != "" {
		s.log.DebugContext(r.Context(), "sim request", "service", service, "order_id", id, "traceparent", tp)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" is not allowed here")
		return
	}
	f := s.fault(service)
	budget, hasBudget := parseBudget(r.Header.Get(HeaderBudget))
	if f.Hang || f.LatencyMS > 0 || f.JitterMS > 0 {
		if !s.hold(w, r, f, budget, hasBudget) {
			return
		}
	}
	if f.ErrorRate > 0 && s.float64() < f.ErrorRate {
		writeError(w, f.ErrorStatus, "INJECTED_FAULT", fmt.Sprintf("injected fault of the %s service", service))
		return
	}
	if !Exists(id) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("order %q does not exist", id))
		return
	}
	b, err := json.Marshal(body(id))
	if err != nil { // cannot happen: the wire types are plain data
		writeError(w, http.StatusInternalServerError, "INTERNAL", err.Error())
		return
	}
	if f.Corrupt {
		b = b[:len(b)/2] // a proper prefix of a JSON object is never valid JSON
	} else {
		b = append(b, '\n')
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// hold performs the fault's wait. It reports whether the request should go
// on; when it should not, it has answered (or the client is gone).
func (s *Server) hold(w http.ResponseWriter, r *http.Request, f Fault, budget time.Duration, hasBudget bool) bool {
	s.holdMu.Lock()
	if s.closed {
		s.holdMu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "SHUTTING_DOWN", "the simulator is shutting down")
		return false
	}
	s.held.Add(1)
	s.holdMu.Unlock()
	defer s.held.Done()
	if s.onHoldStart != nil {
		s.onHoldStart()
	}
	if s.onHoldEnd != nil {
		defer s.onHoldEnd()
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.closing, cancel)
	defer stop()

	var (
		wait        time.Duration
		outOfBudget bool
	)
	switch {
	case f.Hang && !hasBudget:
		<-ctx.Done()
	case f.Hang:
		wait, outOfBudget = budget, true
	default:
		wait = time.Duration(f.LatencyMS) * time.Millisecond
		if f.JitterMS > 0 {
			wait += s.int64n(int64(f.JitterMS)*int64(time.Millisecond) + 1)
		}
		if hasBudget && budget <= wait {
			wait, outOfBudget = budget, true
		}
	}
	if ctx.Err() == nil {
		_ = s.sleep(ctx, wait)
	}
	switch {
	case s.closing.Err() != nil:
		writeError(w, http.StatusServiceUnavailable, "SHUTTING_DOWN", "the simulator is shutting down")
		return false
	case ctx.Err() != nil:
		return false // the client went away: nobody to answer
	case outOfBudget:
		writeError(w, http.StatusGatewayTimeout, "BUDGET_EXHAUSTED", fmt.Sprintf("the client's budget of %v ran out", budget))
		return false
	}
	return true
}

// parseBudget reads X-Budget-Ms. A missing, malformed or negative value is
// treated as no budget.
func parseBudget(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || ms < 0 {
		return 0, false
	}
	if ms > int64(maxBudget/time.Millisecond) {
		return maxBudget, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

func (s *Server) float64() float64 {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64()
}

func (s *Server) int64n(n int64) time.Duration {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return time.Duration(s.rng.Int64N(n))
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) handleFaults(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodDelete:
		s.ResetFaults()
	default:
		w.Header().Set("Allow", "GET, HEAD, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" is not allowed here")
		return
	}
	writeJSON(w, http.StatusOK, s.Faults())
}

func (s *Server) handleFault(w http.ResponseWriter, r *http.Request) {
	service := r.PathValue("service")
	if !knownService(service) {
		writeError(w, http.StatusBadRequest, "UNKNOWN_SERVICE",
			fmt.Sprintf("unknown service %q: want one of %s", service, strings.Join(services, ", ")))
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
	case http.MethodPut:
		f, err := DecodeFault(r.Body)
		if err == nil {
			err = s.SetFault(service, f)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_FAULT", err.Error())
			return
		}
	case http.MethodDelete:
		// SetFault cannot fail for a known service and the healthy fault.
		_ = s.SetFault(service, healthy)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" is not allowed here")
		return
	}
	writeJSON(w, http.StatusOK, s.fault(service))
}

func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" is not allowed here")
		return
	}
	writeJSON(w, http.StatusOK, s.Stats())
}

// handleUnknown answers every path no route matched. A path under a
// service's prefix still counts as a request to that service.
func (s *Server) handleUnknown(w http.ResponseWriter, r *http.Request) {
	if first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); knownService(first) {
		s.requests[first].Add(1)
	}
	writeError(w, http.StatusNotFound, "NOT_FOUND", "no such path: "+r.URL.Path)
}

// errorBody is the simulated services' error document (see the package
// doc), which internal/downstream's client reads.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, b)
}

// writeJSON writes v with status; a value that cannot be encoded becomes a
// 500 error document instead.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"INTERNAL","message":"encoding failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
