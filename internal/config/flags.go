package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3"
)

// EnvPrefix starts the environment twin of every flag: --order-url is
// ORDERAGG_ORDER_URL (ff's WithEnvVarPrefix makes the same mapping).
const EnvPrefix = "ORDERAGG_"

// envName is the environment twin of the flag called name (without dashes).
func envName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

func flagAndEnv(name string) string {
	return fmt.Sprintf("--%s (%s)", name, envName(name))
}

// FlagDoc describes one flag for --help, the README and its sync test.
type FlagDoc struct {
	Name    string // "--addr"
	Env     string // "ORDERAGG_ADDR"
	Type    string // what the value looks like: duration, URL, host:port, …
	Default string // as written on the command line; "" when empty
	Help    string
}

// Flags is one command's flag set. ff parses it: the command line first,
// then the ORDERAGG_* twin of every flag the command line left out (an empty
// variable counts as unset). Every value goes through the same check
// wherever it came from, so errors read the same and name both the flag and
// its variable.
type Flags struct {
	fs     *flag.FlagSet
	prefix string   // of the variables, with its trailing _
	order  []string // definition order, for --help (VisitAll sorts by name)
	bad    error    // the first refused value
}

// NewFlags returns an empty flag set for the command cmd, whose variables
// are EnvPrefix and the flag's name.
func NewFlags(cmd string) *Flags { return NewFlagsPrefixed(cmd, EnvPrefix) }

// NewFlagsPrefixed is NewFlags with another prefix (such as
// ORDERAGG_HEALTHCHECK_), for a command whose flag names would otherwise
// clash with another command's.
func NewFlagsPrefixed(cmd, prefix string) *Flags {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the caller prints the one-line error or the usage
	fs.Usage = func() {}
	return &Flags{fs: fs, prefix: prefix}
}

func (f *Flags) env(name string) string {
	return f.prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// value adapts a check-and-store function to flag.Value. The flag package
// and ff word a refused value themselves, quoting it whole — password
// included — so Set keeps its own message in Flags.bad and Parse returns
// that one instead.
type value struct {
	f         *Flags
	name, typ string
	set       func(string) error
	get       func() string
}

func (v *value) Set(s string) error {
	if err := v.set(s); err != nil {
		v.f.bad = fmt.Errorf("invalid value %q for --%s (%s): %w", redact(s), v.name, v.f.env(v.name), err)
		return v.f.bad
	}
	return nil
}

func (v *value) String() string {
	if v == nil || v.get == nil { // the flag package probes a zero Value
		return ""
	}
	return v.get()
}

func (v *value) IsBoolFlag() bool { return v.typ == "bool" }

// Func defines a flag whose value set checks and stores, and get shows.
func (f *Flags) Func(name, typ, help string, get func() string, set func(string) error) {
	f.fs.Var(&value{f: f, name: name, typ: typ, set: set, get: get}, name, help)
	f.order = append(f.order, name)
}

// String defines a flag taking any string.
func (f *Flags) String(p *string, name, typ, help string) {
	f.Func(name, typ, help, func() string { return *p }, func(s string) error { *p = s; return nil })
}

// Bool defines a flag that is true when given alone (--json).
func (f *Flags) Bool(p *bool, name, help string) {
	f.Func(name, "bool", help, func() string { return strconv.FormatBool(*p) }, func(s string) (err error) {
		if *p, err = strconv.ParseBool(s); err != nil {
			return errors.New("want true or false")
		}
		return nil
	})
}

// Duration defines a positive duration such as 1500ms (or non-negative,
// with allowZero).
func (f *Flags) Duration(p *time.Duration, name, help string, allowZero bool) {
	f.Func(name, "duration", help, func() string { return formatDuration(*p) }, func(s string) error {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return err
		case d < 0 || d == 0 && !allowZero:
			return fmt.Errorf("must be positive, got %s", formatDuration(d))
		}
		*p = d
		return nil
	})
}

// Int defines a positive whole number, at most limit when limit > 0.
func (f *Flags) Int(p *int, name, help string, limit int) {
	f.Func(name, "int", help, func() string { return strconv.Itoa(*p) }, func(s string) error {
		n, err := strconv.Atoi(s)
		var ne *strconv.NumError
		switch {
		case errors.As(err, &ne):
			return fmt.Errorf("must be a whole number: %w", ne.Err)
		case n <= 0:
			return fmt.Errorf("must be positive, got %d", n)
		case limit > 0 && n > limit:
			return fmt.Errorf("must be at most %d, got %d", limit, n)
		}
		*p = n
		return nil
	})
}

// Choice defines one of choices, case-insensitive, stored in lower case.
func (f *Flags) Choice(p *string, name, typ, help string, choices []string) {
	f.Func(name, typ, help, func() string { return *p }, func(s string) error {
		if l := strings.ToLower(s); slices.Contains(choices, l) {
			*p = l
			return nil
		}
		return fmt.Errorf("want one of %s", strings.Join(choices, ", "))
	})
}

// Addr defines a listen address, host:port with a numeric port (0 picks a
// free one); optional allows empty, meaning "off".
func (f *Flags) Addr(p *string, name, help string, optional bool) {
	f.Func(name, "host:port", help, func() string { return *p }, func(s string) error {
		if s == "" && optional {
			*p = s
			return nil
		}
		_, port, err := net.SplitHostPort(s)
		if err != nil {
			return fmt.Errorf("want host:port: %w", err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("port must be a number 0..65535, got %q", port)
		}
		*p = s
		return nil
	})
}

// URL defines an optional base URL: empty, or absolute with one of schemes
// and a host, without a fragment, and without a query unless query is set
// (--redis-url takes its options there).
func (f *Flags) URL(p *string, name, help string, schemes []string, query bool) {
	f.Func(name, "URL", help, func() string { return *p }, func(s string) error {
		if err := CheckURL(s, schemes, query); err != nil {
			return err
		}
		*p = s
		return nil
	})
}

// CheckURL reports why s is not an empty or absolute URL with one of
// schemes and a host. Its errors never repeat s (url.Parse's quote it whole,
// password included).
func CheckURL(s string, schemes []string, query bool) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		// What is left may still quote a piece of the URL ("invalid
		// port \":pa\" after host" when a password holds a '/').
		return errors.New(quoted.ReplaceAllString(err.Error(), ""))
	}
	switch {
	case !slices.Contains(schemes, u.Scheme):
		return fmt.Errorf("scheme must be %s", strings.Join(schemes, " or "))
	case u.Hostname() == "":
		return errors.New("missing host")
	case u.Fragment != "" || (u.RawQuery != "" && !query):
		return errors.New("a base URL takes no query or fragment")
	}
	return nil
}

var (
	quoted = regexp.MustCompile(`\s*"[^"]*"`)
	// userinfo runs to the last '@' of a word, so a password holding '/',
	// '#' or '@' is hidden whole.
	userinfo    = regexp.MustCompile(`(://)\S*@`)
	secretQuery = regexp.MustCompile(`(?i)([?&;](?:sentinel_)?password=)[^&#\s]*`)
)

// redact hides whatever may be a secret in text shown back to the user: the
// user information of anything URL-like and password query parameters. It
// does not need the text to parse, unlike cache.RedactURL.
func redact(s string) string {
	s = userinfo.ReplaceAllString(s, "${1}xxxxx@")
	return secretQuery.ReplaceAllString(s, "${1}xxxxx")
}

// Parse reads args and, when env is set, the environment twins of the flags
// args leave out. --help (-h) returns flag.ErrHelp; every other error is one
// line naming the flag and its variable, and matches ErrUsage.
func (f *Flags) Parse(args []string, env bool) error {
	var opts []ff.Option
	if env {
		opts = append(opts, ff.WithEnvVarPrefix(strings.TrimSuffix(f.prefix, "_")))
	}
	err := ff.Parse(f.fs, args, opts...)
	switch {
	case f.bad != nil:
		return usage(f.bad)
	case errors.Is(err, flag.ErrHelp):
		return flag.ErrHelp
	case err != nil:
		// ff wraps the flag package's message ("flag provided but not
		// defined: -adress"), which is the useful part; "bad flag syntax"
		// repeats the argument, hence redact.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return usage(fmt.Errorf("%s (see --help)", redact(err.Error())))
	case f.fs.NArg() > 0:
		return usage(fmt.Errorf("unexpected argument %q (see --help)", redact(f.fs.Arg(0))))
	}
	return nil
}

// Given reports whether the flag called name was set, on the command line or
// by its variable.
func (f *Flags) Given(name string) bool {
	given := false
	f.fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == name })
	return given
}

// Table lists the flags in definition order with their defaults (the values
// they held when defined).
func (f *Flags) Table() []FlagDoc {
	out := make([]FlagDoc, len(f.order))
	for i, name := range f.order {
		fl := f.fs.Lookup(name)
		out[i] = FlagDoc{Name: "--" + name, Env: f.env(name), Type: fl.Value.(*value).typ, Default: fl.DefValue, Help: fl.Usage}
	}
	return out
}

// WriteUsage writes a command's --help: its usage line, what it does, and
// every flag with its environment variable and default.
func WriteUsage(w io.Writer, usageLine, what string, flags []FlagDoc) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", usageLine, what)
	fmt.Fprintf(w, "Every flag can also be set by its environment variable; the flag wins.\n\nFlags:\n")
	for _, f := range flags {
		def := f.Default
		if def == "" {
			def = "empty"
		}
		fmt.Fprintf(w, "  %s %s  (%s, default %s)\n    \t%s\n", f.Name, f.Type, f.Env, def, f.Help)
	}
}

// MarkdownTable renders flags as a Markdown table (flag, environment
// variable, default, meaning) for the README, so a test can keep the README
// in sync with the code.
func MarkdownTable(flags []FlagDoc) string {
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	for _, f := range flags {
		def := "empty"
		if f.Default != "" {
			def = "`" + f.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", f.Name, f.Env, def, strings.ReplaceAll(f.Help, "|", `\|`))
	}
	return b.String()
}
