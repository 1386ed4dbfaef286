package config

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUsage matches (with errors.Is) every error ParseServe and ParseSim
// return for a bad command line, environment or --config file. The process
// should print the error's one-line message and exit with status 2, as the
// contract requires. --help is not a usage error: it comes back as
// flag.ErrHelp, and the process prints the usage and exits 0.
var ErrUsage = errors.New("config: usage error")

// ErrUnknownDependency is returned by Dependencies.Patch for a name that is
// not one of Names(); the admin API answers it with 404, every other Patch
// error with 400.
var ErrUnknownDependency = errors.New("unknown dependency")

// usageError marks err as a usage error without changing its message, so the
// message stays one line that names the flag or key and the chain stays
// intact for errors.Is.
type usageError struct{ error }

func (e *usageError) Unwrap() error        { return e.error }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

func usage(err error) error {
	if err == nil || errors.Is(err, ErrUsage) {
		return err
	}
	return &usageError{err}
}

// keyError is a problem with one key of a settings document, such as
// "dependencies.coupon.breaker.window". line is the key's line in the source
// when known (files), 0 otherwise (request bodies are one line anyway).
type keyError struct {
	key  string
	line int
	err  error
}

func (e *keyError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s: %v (line %d)", e.key, e.err, e.line)
	}
	return e.key + ": " + e.err.Error()
}

func (e *keyError) Unwrap() error { return e.err }

// prefixed puts a key prefix in front of an error whose message already
// starts with a key, as resilience.Config.Validate's do ("breaker.window: …"
// becomes "dependencies.coupon.breaker.window: …").
type prefixed struct {
	prefix string
	error
}

func (e *prefixed) Error() string { return e.prefix + "." + e.error.Error() }
func (e *prefixed) Unwrap() error { return e.error }

// lineJoin is errors.Join on one line: start-up errors must be one line, and
// a validation may find several problems at once.
type lineJoin []error

func (e lineJoin) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (e lineJoin) Unwrap() []error { return e }

// join returns nil for no errors, the error itself for one, and a one-line
// join of every part (nested joins flattened) for more.
func join(errs []error) error {
	var all []error
	for _, e := range errs {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			e = join(j.Unwrap())
			if j, ok := e.(lineJoin); ok {
				all = append(all, j...)
				continue
			}
		}
		if e != nil {
			all = append(all, e)
		}
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return lineJoin(all)
}

// under prefixes every part of err with prefix.
func under(prefix string, err error) error {
	var parts []error
	if j, ok := join([]error{err}).(lineJoin); ok {
		parts = j
	} else if err != nil {
		parts = []error{err}
	}
	for i, e := range parts {
		parts[i] = &prefixed{prefix, e}
	}
	return join(parts)
}
