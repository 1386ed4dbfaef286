package dashboard

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/orderagg/orderagg/internal/sim"
)

// FaultController is what demo mode needs from the simulators.
// *sim.Server satisfies it.
type FaultController interface {
	// SetFault sets service's fault; an error wrapping sim.ErrUnknownService
	// or sim.ErrInvalidFault means nothing changed.
	SetFault(service string, f sim.Fault) error
	// ResetFaults makes every service healthy.
	ResetFaults()
	// Faults returns the faults in force keyed by service; its keys are the
	// services the controls are offered for.
	Faults() map[string]sim.Fault
}

var _ FaultController = (*sim.Server)(nil)

// healthy is the fault a DELETE sets: the simulator's reset value, with the
// status an error_rate would use spelled out.
var healthy = sim.Fault{ErrorStatus: sim.DefaultErrorStatus}

// serveFaults answers GET and DELETE /dashboard/faults.
func (d *Dashboard) serveFaults(w http.ResponseWriter, r *http.Request) {
	if d.faults == nil {
		writeError(w, http.StatusNotFound, codeNotFound, "fault controls exist only in demo mode")
		return
	}
	if !allowMethods(w, r, http.MethodGet, http.MethodHead, http.MethodDelete) {
		return
	}
	if r.Method == http.MethodDelete {
		d.faults.ResetFaults()
		d.log.InfoContext(r.Context(), "dashboard reset all faults", "remote", r.RemoteAddr)
	}
	writeJSON(w, http.StatusOK, d.faults.Faults())
}

// serveFault answers GET, PUT and DELETE /dashboard/faults/{service}. PUT and
// DELETE, never POST or GET, change things: a browser must ask (CORS
// preflight) before sending them from another origin, so a page elsewhere
// cannot break the demo behind the user's back.
func (d *Dashboard) serveFault(w http.ResponseWriter, r *http.Request) {
	if d.faults == nil {
		writeError(w, http.StatusNotFound, codeNotFound, "fault controls exist only in demo mode")
		return
	}
	if !allowMethods(w, r, http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete) {
		return
	}
	service := r.PathValue("service")
	faults := d.faults.Faults()
	if _, ok := faults[service]; !ok {
		known := slices.Sorted(maps.Keys(faults))
		writeError(w, http.StatusBadRequest, codeUnknownService,
			fmt.Sprintf("unknown service %q: want one of %s", service, strings.Join(known, ", ")))
		return
	}
	switch r.Method {
	case http.MethodPut:
		f, err := decodeFault(r.Body)
		if err != nil {
			writeError(w, http.StatusBadRequest, codeInvalidFault, err.Error())
			return
		}
		if !d.setFault(w, r, service, f) {
			return
		}
	case http.MethodDelete:
		if !d.setFault(w, r, service, healthy) {
			return
		}
	}
	writeJSON(w, http.StatusOK, d.faults.Faults()[service])
}

// setFault applies f and answers the error when it fails; it reports
// whether the handler should go on.
func (d *Dashboard) setFault(w http.ResponseWriter, r *http.Request, service string, f sim.Fault) bool {
	err := d.faults.SetFault(service, f)
	switch {
	case err == nil:
		d.log.InfoContext(r.Context(), "dashboard set fault", "service", service, "fault", f, "remote", r.RemoteAddr)
		return true
	case errors.Is(err, sim.ErrUnknownService):
		writeError(w, http.StatusBadRequest, codeUnknownService, err.Error())
	case errors.Is(err, sim.ErrInvalidFault):
		writeError(w, http.StatusBadRequest, codeInvalidFault, err.Error())
	default:
		d.log.ErrorContext(r.Context(), "dashboard: setting a fault failed", "service", service, "err", err)
		writeError(w, http.StatusInternalServerError, codeInternal, "setting the fault failed")
	}
	return false
}

// decodeFault reads a PUT body by the simulator's own rules, so that no
// FaultController ever sees a fault the simulator's API would refuse.
func decodeFault(r io.Reader) (sim.Fault, error) { return sim.DecodeFault(r) }
