package downstream

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/orderagg/orderagg/internal/orderdetail"
	"github.com/orderagg/orderagg/internal/resilience"
)

// Entry is one registered downstream. Everything that lists dependencies
// derives from the entries: the --NAME-url flags, the --config keys and
// config.example.yaml, the admin API, the guards, /v1/resilience, the
// metrics' labels and the page's sections.
type Entry struct {
	Name        string            // its --NAME-url flag, --config and admin key, guard and metrics label
	Section     string            // its JSON key in the page and its key in the last-good store
	Core        bool              // the order: without it (live or cached) there is no page; Place 0
	Place       int               // sections show by Place, lowest first; from 1
	Defaults    resilience.Config // the guard's settings under the --config file's (zero: resilience's)
	CacheMaxAge time.Duration     // how old a last-good answer may be and still be served
	// About (the section and its default) and Why (the reason for each
	// default set, by --config key): one line each, for config.example.yaml.
	About string
	Why   map[string]string
	New   Builder // SectionOf, or CoreOf for the order
}

// Builder makes entry e's downstream and the function that closes its
// client's idle connections.
type Builder func(e Entry, c Config, g *resilience.Guard, maxAge time.Duration) (*orderdetail.Downstream, func(), error)

// CoreOf is the Builder of the core section, through a Client of api.
func CoreOf[T any](api API[T]) Builder { return SectionOf(api, nil) }

// SectionOf is the Builder of a degradable section, through a Client of
// api; fallback states "unknown" in the section's own terms.
func SectionOf[T any](api API[T], fallback func(Order) T) Builder {
	return func(e Entry, c Config, g *resilience.Guard, maxAge time.Duration) (*orderdetail.Downstream, func(), error) {
		cl, err := NewClient(e.Name, api, c)
		if err != nil {
			return nil, nil, err
		}
		s := orderdetail.Spec[T]{Name: e.Section, Guard: g, MaxAge: maxAge, Fetch: cl.Get, Decode: api.DecodeCached}
		if fallback == nil {
			return orderdetail.NewCore(s), cl.Close, nil
		}
		s.Fallback = func(core any) T { return fallback(core.(Order)) }
		return orderdetail.NewSection(s), cl.Close, nil
	}
}

var (
	registry  []Entry                                  // by Place
	validName = regexp.MustCompile(`^[a-z][a-z0-9]*$`) // a flag, an env var, a YAML key and a label
)

// Register adds a downstream to the page; call it from an init function.
// It panics on an entry that cannot be served: a name or section not
// matching ^[a-z][a-z0-9]*$ or already taken, the name "cache" (the store's
// guard), a second core, a core not at Place 0 or a section before 1, no
// builder, or a maximum cache age that is not positive.
func Register(e Entry) {
	ok := validName.MatchString(e.Name) && validName.MatchString(e.Section) && e.Name != "cache" &&
		e.Core == (e.Place == 0) && e.Place >= 0 && e.New != nil && e.CacheMaxAge > 0
	for _, o := range registry {
		ok = ok && o.Name != e.Name && o.Section != e.Section && !(o.Core && e.Core)
	}
	if !ok {
		panic(fmt.Sprintf("downstream.Register: entry %q/%q cannot be served (see Register)", e.Name, e.Section))
	}
	registry = append(registry, e)
	slices.SortStableFunc(registry, func(a, b Entry) int { return a.Place - b.Place })
}

// Registered returns the registered downstreams in page order, the core
// first, in a slice of the caller's.
func Registered() []Entry { return slices.Clone(registry) }

// Names returns the registered downstreams' names in page order.
func Names() []string {
	var out []string
	for _, e := range registry {
		out = append(out, e.Name)
	}
	return out
}

// API is one downstream's HTTP API: where an order's answer lives and how
// to read it.
type API[T any] struct {
	Path string // the answer's path below the base URL, "{id}" standing for the escaped order id
	// Decode reads a 200 body: nil, the body is T's own JSON; Wire, a
	// document of the service's own carrying the order_id.
	Decode func(body []byte, orderID string) (T, error)
	// Check holds an answer, live or cached, to the service's promises;
	// what it refuses is a failure of the dependency.
	Check func(v T, orderID string) error
}

// read reads a live body (wire) or a last-good payload, then Checks it.
func (a API[T]) read(body []byte, orderID string, wire bool) (v T, err error) {
	if wire && a.Decode != nil {
		v, err = a.Decode(body, orderID)
	} else {
		err = unmarshal(body, &v)
	}
	if err == nil {
		err = a.Check(v, orderID)
	}
	if err != nil {
		return *new(T), err
	}
	return v, nil
}

// DecodeCached reads a last-good payload (T as JSON) as strictly as a live
// answer: the store is outside the process.
func (a API[T]) DecodeCached(payload []byte, orderID string) (T, error) {
	return a.read(payload, orderID, false)
}

// Envelope is the "order_id" of a service's document; Wire requires it
// to be the one asked for.
type Envelope struct {
	OrderID *string `json:"order_id"`
}

func (e Envelope) orderID() *string { return e.OrderID }

// Wire is the Decode of a service whose answer is a document W of its own,
// embedding Envelope: answer makes the API's T of it.
func Wire[W interface{ orderID() *string }, T any](answer func(W) T) func(body []byte, orderID string) (T, error) {
	return func(body []byte, orderID string) (T, error) {
		var w W
		c := Check{err: unmarshal(body, &w)}
		if got := w.orderID(); got == nil {
			c.That(false, "order_id", "is missing")
		} else {
			c.That(*got == orderID, "order_id", strconv.Quote(*got)+" is not the requested "+strconv.Quote(orderID))
		}
		return answer(w), c.Err()
	}
}

// Check collects the first rule an answer breaks, as ErrMalformed naming
// the field. Rules judge values: a field whose zero value is a valid
// answer (an empty name, a total of 0) may be absent; any other must be
// present and valid.
type Check struct{ err error }

// Err is the first broken rule, or nil.
func (c *Check) Err() error { return c.err }

// That records "field rule" unless ok.
func (c *Check) That(ok bool, field, rule string) {
	if !ok && c.err == nil {
		c.err = fmt.Errorf("%w: %s %s", ErrMalformed, field, rule)
	}
}

// At records "list[i].field rule" unless ok.
func (c *Check) At(ok bool, list string, i int, field, rule string) {
	if !ok {
		c.That(false, list+"["+strconv.Itoa(i)+"]."+field, rule)
	}
}

// unmarshal decodes body into v: invalid JSON or a wrong type is ErrMalformed.
func unmarshal(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: body %v", ErrMalformed, err)
	}
	return nil
}

// IsToken reports whether s is an upper-case enum value such as
// IN_TRANSIT, at most 64 bytes.
func IsToken(s string) bool { return token.MatchString(s) }

var token = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)
