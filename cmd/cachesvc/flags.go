package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// newFlagSet returns a FlagSet for subcommand name whose usage lists every
// flag with its environment variable. summary is printed above the flags.
func newFlagSet(name, summary string, sio stdio) *flag.FlagSet {
	fs := flag.NewFlagSet("cachesvc "+name, flag.ContinueOnError)
	fs.SetOutput(sio.Stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: cachesvc %s [flags]\n\n%s\n\nFlags (each also from the environment variable shown):\n", name, summary)
		fs.VisitAll(func(f *flag.Flag) {
			typ, usage := flag.UnquoteUsage(f)
			env := envName(f.Name)
			if _, ok := f.Value.(cmdLineOnly); ok {
				env = "command line only"
			}
			fmt.Fprintf(w, "  --%s %s\t[%s]\n    \t%s", f.Name, typ, env, usage)
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
				fmt.Fprintf(w, " (default %s)", f.DefValue)
			}
			fmt.Fprintln(w)
		})
	}
	return fs
}

// envName returns the environment variable for flag name:
// "max-entry-size" → "CACHESVC_MAX_ENTRY_SIZE".
func envName(flagName string) string {
	r := strings.NewReplacer("-", "_", ".", "_")
	return "CACHESVC_" + strings.ToUpper(r.Replace(flagName))
}

// parseFlags sets every flag of fs from its CACHESVC_<FLAG> environment
// variable, then parses args, so that the command line wins. Errors are
// usageErrors; --help returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string, sio stdio) error {
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if envErr != nil {
			return
		}
		if _, ok := f.Value.(cmdLineOnly); ok {
			return
		}
		name := envName(f.Name)
		v := sio.getenv(name)
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			envErr = usagef("invalid value %q for %s: %s", v, name, err)
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%s", err)
	}
	return nil
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
		return 0, fmt.Errorf("size %q has unknown unit %q: use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB", s, t[i:])
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
