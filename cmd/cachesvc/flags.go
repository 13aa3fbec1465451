package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// newFlagSet returns a FlagSet for the subcommand that use names: the
// command path, then its positional arguments in upper case ("key FILE...",
// "plugin check FILE.wasm"). Its --help, printed to stdout, shows the usage
// line, summary and every flag with its environment variable. Flags that
// parse errors print nothing themselves: parseFlags returns a usageError.
func newFlagSet(use, summary string, sio stdio) *flag.FlagSet {
	path, operands := splitUse(use)
	fs := flag.NewFlagSet("cachesvc "+path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() { writeHelp(sio.Stdout, fs, path, operands, summary) }
	return fs
}

// splitUse splits "plugin check FILE.wasm" into the command path ("plugin
// check": the leading lower-case words) and the operands ("FILE.wasm").
func splitUse(use string) (path, operands string) {
	words := strings.Fields(use)
	i := 0
	for i < len(words) && strings.ToLower(words[i]) == words[i] && !strings.HasPrefix(words[i], "[") {
		i++
	}
	return strings.Join(words[:i], " "), strings.Join(words[i:], " ")
}

// flagName writes a flag's name as it is typed and as help shows it: -o
// for a one-letter name (a short alias), --name for a longer one.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// aliasValue is the Value of a flag that is another name of the flag "to":
// it shares to's Value, is not listed on its own in help, and its
// environment variable is read only when to's is unset.
type aliasValue struct {
	flag.Value
	to string
}

// aliasFlag defines alias as another name of the already defined flag to
// (not for bool flags: an alias does not take the bare --name form). A
// one-letter alias is a short form, shown as -o in help.
func aliasFlag(fs *flag.FlagSet, alias, to string) {
	f := fs.Lookup(to)
	if f == nil {
		panic("aliasFlag: no flag --" + to)
	}
	fs.Var(&aliasValue{Value: f.Value, to: to}, alias, "alias of "+flagName(to))
}

// isAlias reports whether f was defined by aliasFlag.
func isAlias(f *flag.Flag) bool {
	_, ok := f.Value.(*aliasValue)
	return ok
}

// aliasesOf maps each flag name to its aliases, in name order.
func aliasesOf(fs *flag.FlagSet) map[string][]string {
	m := map[string][]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if a, ok := f.Value.(*aliasValue); ok {
			m[a.to] = append(m[a.to], f.Name)
		}
	})
	return m
}

// envName returns the environment variable for flag name:
// "max-entry-size" → "CACHESVC_MAX_ENTRY_SIZE".
func envName(flagName string) string {
	r := strings.NewReplacer("-", "_", ".", "_")
	return "CACHESVC_" + strings.ToUpper(r.Replace(flagName))
}

// parseFlags sets every flag of fs from its CACHESVC_<FLAG> environment
// variable (or, when that is unset, an alias's, with a note on stderr that
// the alias is an old name), then parses args, so that the command line
// wins. Errors are usageErrors; --help prints the help to stdout and
// returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string, sio stdio) error {
	if sio.observeFlags != nil {
		sio.observeFlags(fs)
	}
	aliases := aliasesOf(fs)
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if envErr != nil || isAlias(f) {
			return
		}
		if _, ok := f.Value.(cmdLineOnly); ok {
			return
		}
		name := envName(f.Name)
		v := sio.getenv(name)
		for _, a := range aliases[f.Name] {
			if v != "" {
				break
			}
			if v = sio.getenv(envName(a)); v != "" {
				fmt.Fprintf(sio.Stderr, "cachesvc: %s is an old name of %s; set %s instead\n", envName(a), name, name)
				name = envName(a)
			}
		}
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			envErr = usagef("invalid value %q for %s: %s", v, name, explainValueErr(f.Value, err.Error()))
			return
		}
		if m, ok := f.Value.(interface{ markFromEnv() }); ok {
			m.markFromEnv()
		}
	})
	if envErr != nil {
		return envErr
	}
	return parseArgs(fs, args)
}

// parseOperandless is parseFlags for a command that takes no positional
// arguments: any left is a usageError. Flags after a stray argument are
// still parsed (as parseInterspersed does), so that the error names only
// the stray arguments, not every flag that followed them, and a bad flag
// among them is reported as such.
func parseOperandless(fs *flag.FlagSet, args []string, sio stdio) error {
	pos, err := parseInterspersed(fs, args, sio)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments: %s", strings.Join(pos, " "))
	}
	return nil
}

// isSet reports whether parseFlags set any of the flags names of fs, from
// the command line or from the environment (a value equal to the default
// counts as set).
func isSet(fs *flag.FlagSet, names ...string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || slices.Contains(names, f.Name) })
	return set
}

// cmdLineOnly wraps a flag's value so that parseFlags never sets it from
// the environment: admin's filters and confirmations, where a CACHESVC_RUN
// or CACHESVC_MAX_SIZE meant for another command must not choose what
// `admin delete` removes.
type cmdLineOnly struct{ flag.Value }

// IsBoolFlag keeps a wrapped boolean flag usable without a value.
func (v cmdLineOnly) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// commandLineOnly marks the flags names of fs as cmdLineOnly.
func commandLineOnly(fs *flag.FlagSet, names ...string) {
	for _, n := range names {
		f := fs.Lookup(n)
		f.Value = cmdLineOnly{f.Value}
	}
}

// parseArgs parses args into fs. fs.Usage runs only for --help, not for a
// parse error: the error alone, with a pointer to --help, is what run prints.
func parseArgs(fs *flag.FlagSet, args []string) error {
	help := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = help
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		help()
		return err
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimPrefix(name, "-")
		msg = "unknown flag --" + name + didYouMean(name, "--", flagNames(fs)) // suggest.go
	}
	msg = explainParseErr(fs, msg)
	return &usageError{msg: msg, cmd: strings.TrimPrefix(fs.Name(), "cachesvc ")}
}

// explainParseErr rewrites the flag package's message for a bad value,
// `invalid value "x" for flag -name: parse error` (or `invalid boolean
// value "x" for -name: ...`), to name the flag as everything else does
// (--name) and, for a built-in flag type, to say what the flag takes.
func explainParseErr(fs *flag.FlagSet, msg string) string {
	head, cause, ok := strings.Cut(msg, ": ")
	if !ok {
		return msg
	}
	what, name, ok := strings.Cut(head, " for flag -")
	if !ok {
		if what, name, ok = strings.Cut(head, " for -"); !ok {
			return msg
		}
	}
	head = what + " for --" + name
	if f := fs.Lookup(name); f != nil {
		cause = explainValueErr(f.Value, cause)
	}
	return head + ": " + cause
}

// explainValueErr replaces the flag package's bare "parse error" (or
// "value out of range") for a value of v's type with what v takes; other
// causes, such as a size's own sentence, pass unchanged.
func explainValueErr(v flag.Value, cause string) string {
	if cause != "parse error" && cause != "value out of range" {
		return cause
	}
	if w, ok := v.(cmdLineOnly); ok {
		v = w.Value
	}
	g, ok := v.(flag.Getter)
	if !ok {
		return cause
	}
	var want string
	switch g.Get().(type) {
	case bool:
		want = "use true or false"
	case time.Duration:
		want = "use a duration such as 90s, 5m or 1h30m"
	case int, int64:
		want = "use an integer"
	case uint, uint64:
		want = "use a non-negative integer"
	case float64:
		want = "use a number"
	default:
		return cause
	}
	if cause == "value out of range" {
		return "out of range: " + want + " that fits"
	}
	return "not understood: " + want
}

// byteSize is a flag.Value holding a size in bytes that accepts human units.
type byteSize int64

// sizeVar defines a size flag with human units (see parseSize).
func sizeVar(fs *flag.FlagSet, p *int64, name string, def int64, usage string) {
	*p = def
	fs.Var((*byteSize)(p), name, usage)
}

// String formats the size with the largest exact binary unit.
func (b *byteSize) String() string { return formatSize(int64(*b)) }

// Set parses s with parseSize.
func (b *byteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// Type names the value in usage output.
func (b *byteSize) Type() string { return "size" }

// positiveSize is a size flag that refuses 0, for a limit that a library
// reads as its default when 0: there, 0 would quietly not mean "no limit".
type positiveSize struct {
	p   *int64
	def int64 // named in the refusal as an example
}

// positiveSizeVar defines a size flag that must be above 0.
func positiveSizeVar(fs *flag.FlagSet, p *int64, name string, def int64, usage string) {
	*p = def
	fs.Var(&positiveSize{p: p, def: def}, name, usage)
}

// String formats the size as byteSize does.
func (s *positiveSize) String() string {
	if s.p == nil { // the flag package may call String on a zero Value
		return "0"
	}
	return formatSize(*s.p)
}

// Set parses v with parseSize and refuses 0.
func (s *positiveSize) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("want a positive size, e.g. %s", formatSize(s.def))
	}
	*s.p = n
	return nil
}

// Type names the value in usage output.
func (s *positiveSize) Type() string { return "size" }

// age is a flag.Value holding a positive duration that also accepts whole
// days ("30d"), as the admin filters and namespace expiry do (wire.ParseAge).
type age time.Duration

// ageVar defines an age flag (see wire.ParseAge).
func ageVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*age)(p), name, usage)
}

// String formats the age with formatAge.
func (a *age) String() string { return formatAge(time.Duration(*a)) }

// formatAge formats d in whole days when it is some ("30d"), else as a
// duration ("36h0m0s"): the way an age flag reads it back.
func formatAge(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

// Set parses s with wire.ParseAge.
func (a *age) Set(s string) error {
	d, err := wire.ParseAge(s)
	if err != nil {
		return err
	}
	*a = age(d)
	return nil
}

// boundedDuration is a flag.Value holding a duration no less than least. A
// timeout or interval below what it can mean would otherwise reach code
// that quietly reads it as something else: an already expired deadline, no
// limit at all, or a library's default. Refusing it as it is parsed, from
// the command line or the environment, names where the value came from.
type boundedDuration struct {
	d     *time.Duration
	least time.Duration
	want  string // what the flag takes, e.g. "0 (no limit) or more, e.g. 30s"
}

// positiveDuration is the least of a duration flag that has no "off" value.
const positiveDuration = time.Nanosecond

// noLimitOrMore is the want of a client command's --timeout, where 0 means
// no limit (withTimeout).
const noLimitOrMore = "0 (no limit) or more, e.g. 30s"

// durationVar defines a duration flag that refuses a value below least with
// "want " + want, which says what is allowed and what 0 means if allowed.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def, least time.Duration, want, usage string) {
	*p = def
	fs.Var(&boundedDuration{d: p, least: least, want: want}, name, usage)
}

// String formats the duration as time.Duration does ("30s").
func (b *boundedDuration) String() string {
	if b.d == nil { // the flag package may call String on a zero Value
		return "0s"
	}
	return b.d.String()
}

// Get returns the time.Duration, so that explainValueErr says what an
// unparsable value should look like, as for any duration flag.
func (b *boundedDuration) Get() any { return *b.d }

// Set parses s with time.Duration's syntax and refuses a value below least.
func (b *boundedDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("parse error") // explainValueErr completes it
	}
	if d < b.least {
		return errors.New("want " + b.want)
	}
	*b.d = d
	return nil
}

// boundedUint is a flag.Value holding a non-negative integer no greater
// than most. A value past it is refused as it is parsed, from the command
// line or the environment, rather than quietly cut to most.
type boundedUint struct {
	n    *uint
	most uint
	want string // what the flag takes, e.g. "0 (the default) to 1024"
}

// uintVar defines an unsigned flag that refuses a value above most with
// "want " + want.
func uintVar(fs *flag.FlagSet, p *uint, name string, def, most uint, want, usage string) {
	*p = def
	fs.Var(&boundedUint{n: p, most: most, want: want}, name, usage)
}

// String formats the value in decimal.
func (b *boundedUint) String() string {
	if b.n == nil { // the flag package may call String on a zero Value
		return "0"
	}
	return strconv.FormatUint(uint64(*b.n), 10)
}

// Get returns the uint, so that explainValueErr says what an unparsable
// value should look like, as for any unsigned flag.
func (b *boundedUint) Get() any { return *b.n }

// Type names the value in help, as the flag package names a uint flag's.
func (b *boundedUint) Type() string { return "uint" }

// Set parses s as a non-negative integer and refuses one above most.
func (b *boundedUint) Set(s string) error {
	v, err := strconv.ParseUint(s, 0, strconv.IntSize)
	if err != nil {
		return errors.New("parse error") // explainValueErr completes it
	}
	if v > uint64(b.most) {
		return errors.New("want " + b.want)
	}
	*b.n = uint(v)
	return nil
}

// withTimeout bounds ctx by d, or only by ctx when d is 0: the "0 (no
// limit)" of the client commands' --timeout.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// sizeUnits maps a lowercase unit suffix to its multiplier. KB, MB, GB, TB are
// decimal; KiB, MiB, GiB, TiB and the bare K, M, G, T are binary.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// parseSize parses a byte size such as "0", "4096", "512MB", "10GiB" or
// "1.5G". Units are case-insensitive.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("size %q must start with a number, e.g. 512MiB or 10GB", s)
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		return 0, fmt.Errorf("size %q has unknown unit %q: use B (or none), decimal KB, MB, GB, TB, or binary KiB, MiB, GiB, TiB (or K, M, G, T)", s, t[i:])
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("parse size %q: %w", s, err)
	}
	v := f * float64(mult)
	// float64(math.MaxInt64) rounds up to 2^63, which does not fit: >=.
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(v), nil
}

// formatSize renders n with the largest binary unit that divides it exactly.
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
