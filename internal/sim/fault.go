package sim

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Errors of SetFault and of the fault API.
var (
	ErrUnknownService = errors.New("sim: unknown service")
	ErrInvalidFault   = errors.New("sim: invalid fault")
)

// Limits of a Fault's fields: latency_ms and jitter_ms, the status of an error.
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

// healthy is the fault after a reset, with the ErrorStatus an error_rate
// would use.
var healthy = Fault{ErrorStatus: DefaultErrorStatus}

// normalize applies the ErrorStatus default and checks the ranges; the
// error wraps ErrInvalidFault.
func (f Fault) normalize() (Fault, error) {
	f.ErrorStatus = cmp.Or(f.ErrorStatus, DefaultErrorStatus)
	var bad string
	switch {
	case f.LatencyMS < 0 || f.LatencyMS > MaxDelayMS || f.JitterMS < 0 || f.JitterMS > MaxDelayMS:
		bad = fmt.Sprintf("latency_ms and jitter_ms must be 0..%d, got %d and %d", MaxDelayMS, f.LatencyMS, f.JitterMS)
	case !(f.ErrorRate >= 0 && f.ErrorRate <= 1): // NaN too
		bad = fmt.Sprintf("error_rate must be 0..1, got %v", f.ErrorRate)
	case f.ErrorStatus < 400 || f.ErrorStatus > 599:
		bad = fmt.Sprintf("error_status must be 400..599, got %d", f.ErrorStatus)
	default:
		return f, nil
	}
	return Fault{}, fmt.Errorf("%w: %s", ErrInvalidFault, bad)
}

// maxFaultBody bounds a PUT /faults body; a real one is under 200 bytes.
const maxFaultBody = 16 << 10

// decodeFault reads a PUT /faults/{service} body: one JSON object whose
// omitted or null fields keep their defaults. Anything else (unknown
// fields, wrong types, not an object, trailing data, a body over 16 KiB,
// values out of range) is an error wrapping ErrInvalidFault.
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
