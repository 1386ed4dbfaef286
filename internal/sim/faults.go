package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// The four simulated services, as named in paths and in the fault API.
const (
	ServiceOrder     = "order"
	ServiceInventory = "inventory"
	ServiceCoupon    = "coupon"
	ServiceLogistics = "logistics"
)

var services = []string{ServiceOrder, ServiceInventory, ServiceCoupon, ServiceLogistics}

// Services returns the names of the four services, in a fixed order.
func Services() []string { return slices.Clone(services) }

func knownService(s string) bool { return slices.Contains(services, s) }

// Errors of SetFault and of the fault API.
var (
	ErrUnknownService = errors.New("unknown service")
	ErrInvalidFault   = errors.New("invalid fault")
)

// Limits of a Fault's fields.
const (
	MaxDelayMS         = 600_000 // latency_ms and jitter_ms: ten minutes is plenty to show a hang-like service
	DefaultErrorStatus = 500
)

// Fault is what goes wrong with one service. The zero value is a healthy
// service, except that a zero ErrorStatus means DefaultErrorStatus.
type Fault struct {
	// LatencyMS is added before every answer.
	LatencyMS int `json:"latency_ms"`
	// JitterMS adds a uniform random 0..JitterMS on top of LatencyMS.
	JitterMS int `json:"jitter_ms"`
	// ErrorRate is the probability (0..1) that a request gets ErrorStatus.
	ErrorRate float64 `json:"error_rate"`
	// ErrorStatus is the status of injected errors, 400..599.
	ErrorStatus int `json:"error_status"`
	// Hang holds every request until the client goes away or its budget
	// (X-Budget-Ms) runs out. It overrides LatencyMS and JitterMS.
	Hang bool `json:"hang"`
	// Corrupt answers 200 with a body that is not valid JSON.
	Corrupt bool `json:"corrupt"`
}

// healthy is the fault in force after a reset; its ErrorStatus is spelled
// out so that GET /faults shows the status an error_rate would use.
var healthy = Fault{ErrorStatus: DefaultErrorStatus}

// normalize applies the ErrorStatus default and checks the ranges.
func (f Fault) normalize() (Fault, error) {
	if f.ErrorStatus == 0 {
		f.ErrorStatus = DefaultErrorStatus
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidFault}, args...)...))
	}
	if f.LatencyMS < 0 || f.LatencyMS > MaxDelayMS {
		bad("latency_ms must be 0..%d, got %d", MaxDelayMS, f.LatencyMS)
	}
	if f.JitterMS < 0 || f.JitterMS > MaxDelayMS {
		bad("jitter_ms must be 0..%d, got %d", MaxDelayMS, f.JitterMS)
	}
	// The negated form also rejects NaN, which Go callers can pass.
	if !(f.ErrorRate >= 0 && f.ErrorRate <= 1) {
		bad("error_rate must be 0..1, got %v", f.ErrorRate)
	}
	if f.ErrorStatus < 400 || f.ErrorStatus > 599 {
		bad("error_status must be 400..599, got %d", f.ErrorStatus)
	}
	return f, errors.Join(errs...)
}

// maxFaultBody bounds a PUT /faults body; a real one is under 200 bytes.
const maxFaultBody = 16 << 10

// DecodeFault reads a PUT /faults/{service} body: one JSON object whose
// omitted (or null) fields keep their defaults. Unknown fields, wrong types,
// anything but an object, trailing data and out-of-range values are errors
// matching ErrInvalidFault. The dashboard's fault controls use it too, so
// both APIs accept exactly the same bodies.
func DecodeFault(r io.Reader) (Fault, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxFaultBody+1))
	if err != nil {
		return Fault{}, fmt.Errorf("%w: reading body: %v", ErrInvalidFault, err)
	}
	if len(raw) > maxFaultBody {
		return Fault{}, fmt.Errorf("%w: body over %d bytes", ErrInvalidFault, maxFaultBody)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Fault{}, fmt.Errorf("%w: body must be a JSON object", ErrInvalidFault)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	f := healthy
	if err := dec.Decode(&f); err != nil {
		return Fault{}, fmt.Errorf("%w: %v", ErrInvalidFault, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Fault{}, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidFault)
	}
	return f.normalize()
}
