package downstream

import (
	"fmt"
	"strconv"
	"time"
)

// Check collects the first rule a downstream's answer breaks, so that a
// decoder reads as a list of field rules and fails with ErrMalformed naming
// the field:
//
//	var c downstream.Check
//	c.OrderID(downstream.Top("order_id"), w.OrderID, orderID)
//	for i, it := range w.Items {
//		sku := c.NonEmpty(downstream.Elem("items", i, "sku"), it.SKU)
//		…
//	}
//	if err := c.Err(); err != nil { return zero, err }
//
// The wire fields are pointers, so that a missing or null field is told from
// a zero one.
type Check struct{ err error }

// Err is the first failure, wrapping ErrMalformed, or nil.
func (c *Check) Err() error { return c.err }

// Field names a field for an error message: "user_id", or "items[3].sku"
// for one in a list. It is formatted only when a rule fails, so checking a
// healthy answer costs no allocation per field.
type Field struct {
	list string // the list's key; empty for a top-level field
	i    int    // the element's index in list
	key  string
}

// Top names a top-level field (or a dotted path: "shipping_address.city").
func Top(key string) Field { return Field{key: key} }

// Elem names field key of element i of list.
func Elem(list string, i int, key string) Field { return Field{list: list, i: i, key: key} }

func (f Field) String() string {
	if f.list == "" {
		return f.key
	}
	return f.list + "[" + strconv.Itoa(f.i) + "]." + f.key
}

// Fail records a failure (only the first is kept).
func (c *Check) Fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
}

// Str requires the field to be present; empty is allowed.
func (c *Check) Str(name Field, p *string) string {
	if p == nil {
		c.Fail("%s is missing", name)
		return ""
	}
	return *p
}

// NonEmpty requires a present, non-empty string.
func (c *Check) NonEmpty(name Field, p *string) string {
	s := c.Str(name, p)
	if p != nil && s == "" {
		c.Fail("%s is empty", name)
	}
	return s
}

// Token requires an upper-case enum value such as IN_TRANSIT: anything else
// is not a status this API would send.
func (c *Check) Token(name Field, p *string) string {
	s := c.NonEmpty(name, p)
	if len(s) > 64 {
		c.Fail("%s is longer than 64 bytes", name)
		return s
	}
	for i, r := range s {
		if !(r >= 'A' && r <= 'Z' || i > 0 && (r == '_' || r >= '0' && r <= '9')) {
			c.Fail("%s %q is not an upper-case token", name, s)
			break
		}
	}
	return s
}

// OrderID requires the answer to be about the order that was asked for.
func (c *Check) OrderID(name Field, p *string, want string) {
	if got := c.NonEmpty(name, p); p != nil && got != "" && got != want {
		c.Fail("%s %q is not the requested %q", name, got, want)
	}
}

// AtLeast requires a present number no lower than lo.
func AtLeast[T int | int64](c *Check, name Field, p *T, lo T) T {
	if p == nil {
		c.Fail("%s is missing", name)
		return 0
	}
	if *p < lo {
		c.Fail("%s is %d, below %d", name, *p, lo)
	}
	return *p
}

// Between requires a present number from lo to hi.
func Between[T int | int64](c *Check, name Field, p *T, lo, hi T) T {
	v := AtLeast(c, name, p, lo)
	if p != nil && v > hi {
		c.Fail("%s is %d, above %d", name, v, hi)
	}
	return v
}

// Time requires a present, non-zero time.
func (c *Check) Time(name Field, p *time.Time) time.Time {
	if p == nil {
		c.Fail("%s is missing", name)
		return time.Time{}
	}
	if p.IsZero() {
		c.Fail("%s is the zero time", name)
	}
	return *p
}

// List requires a list to be present ([] is fine, null or missing is not).
func (c *Check) List(name string, isNil bool) {
	if isNil {
		c.Fail("%s is missing", name)
	}
}
