package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"time"
)

// writeHelp writes fs's help: usage line, summary, and each flag (aliases on
// their target's line) with its environment variables.
func writeHelp(w io.Writer, fs *flag.FlagSet, path, operands, summary string) {
	line := "cachesvc " + path
	if hasFlags(fs) {
		line += " [flags]"
	}
	if operands != "" {
		line += " " + operands
	}
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", line, summary)
	if !hasFlags(fs) {
		return
	}
	fmt.Fprintf(w, "\nFlags (each also from the environment variable shown):\n")
	writeFlags(w, fs, flagGroups[path])
}

// writeFlags writes each flag of fs but aliases, which show on their
// target's line: alphabetically when groups is empty, else under each
// group's heading in the group's order, then any flag no group names under
// otherFlagsTitle. A group's name of a flag fs lacks is skipped.
func writeFlags(w io.Writer, fs *flag.FlagSet, groups []flagGroup) {
	aliases := aliasesOf(fs)
	if len(groups) == 0 {
		fs.VisitAll(func(f *flag.Flag) {
			if !isAlias(f) {
				writeFlag(w, f, aliases[f.Name])
			}
		})
		return
	}
	shown := map[string]bool{}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.flags {
			if f := fs.Lookup(name); f != nil && !isAlias(f) && !shown[name] {
				writeFlag(w, f, aliases[name])
				shown[name] = true
			}
		}
	}
	heading := false
	fs.VisitAll(func(f *flag.Flag) {
		if isAlias(f) || shown[f.Name] {
			return
		}
		if !heading {
			fmt.Fprintf(w, "\n%s:\n", otherFlagsTitle)
			heading = true
		}
		writeFlag(w, f, aliases[f.Name])
	})
}

// writeFlag writes one flag's entry in help: its name, what it takes, its
// aliases and environment variables, then its usage and default.
func writeFlag(w io.Writer, f *flag.Flag, aliases []string) {
	typ, usage := flag.UnquoteUsage(f)
	if typ == "value" {
		typ = valueType(f.Value)
	}
	name := flagName(f.Name)
	if typ != "" {
		name += " " + typ
	}
	env := envName(f.Name)
	for _, a := range aliases {
		name += " (alias " + flagName(a) + ")"
		env += "; alias " + envName(a)
	}
	if _, ok := f.Value.(cmdLineOnly); ok {
		env = "command line only"
	}
	fmt.Fprintf(w, "  %s\t[%s]\n    \t%s", name, env, usage)
	switch f.DefValue {
	case "", "0", "false":
	case "default":
		// The namespace flags: "(default default)" reads as a stutter.
		fmt.Fprintf(w, " (default %q)", f.DefValue)
	default:
		fmt.Fprintf(w, " (default %s)", f.DefValue)
	}
	fmt.Fprintln(w)
}

// valueType names what a flag whose Value the flag package does not know
// takes, where UnquoteUsage could only say "value": the Value's own Type
// (a size), a duration as the flag package names its own, "string" for a
// string flag wrapped by commandLineOnly.
func valueType(v flag.Value) string {
	if w, ok := v.(cmdLineOnly); ok {
		v = w.Value
	}
	if t, ok := v.(interface{ Type() string }); ok {
		return t.Type()
	}
	if g, ok := v.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			return "duration"
		case string:
			return "string"
		}
	}
	return "value"
}

// hasFlags reports whether fs defines any flag.
func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// flagGroup is a heading of a command's help and the flags listed under
// it, by name (aliases excluded: they show on their target's line), in the
// order shown.
type flagGroup struct {
	title string
	flags []string
}

// otherFlagsTitle heads, last, the flags of a grouped command that no group
// names: shown rather than hidden, though TestHelpFlagGroups fails on them.
const otherFlagsTitle = "Other flags"

// flagGroups holds, by command path, the headings under which a command
// with many flags lists them, so that an operator reads the common ones
// first instead of scanning them all in alphabetical order. A command not
// here lists its flags alphabetically under no heading. A flag added to a
// grouped command must be added to one of its groups (TestHelpFlagGroups).
var flagGroups = map[string][]flagGroup{
	"serve": {
		{"Basics", []string{"addr", "data", "max-size", "max-entry-size", "tokens", "log-level", "log-format"}},
		{"Storage and quotas", []string{"namespaces", "expiry-interval", "sync-writes", "quarantine-after"}},
		{"Security", []string{"tls-cert", "tls-key", "tls-client-ca", "insecure-no-auth", "signing-key", "trusted-proxies"}},
		{"Shared tier (a fleet of replicas over S3)", []string{"s3-endpoint", "s3-bucket", "s3-region", "s3-prefix",
			"s3-credentials-file", "s3-profile", "s3-insecure", "s3-check-then-write", "write-mode",
			"upload-queue-size", "upload-queue-entries", "replica-id", "advertise-url"}},
		{"Redis-protocol listener (stock torch and Triton)", []string{"redis-addr", "redis-namespace", "redis-max-value",
			"redis-max-conns", "redis-max-buffered", "redis-idle-timeout"}},
		{"Shutdown and profiling", []string{"shutdown-grace", "shutdown-delay", "pprof-addr"}},
		{"Plugins and signatures", []string{"plugins", "wasm-cache", "plugin-pool", "plugin-memory", "plugin-timeout",
			"max-signature-size", "signature-memo-entries", "digest-lookups"}},
		{"Connection and request limits (tuning)", []string{"rate-limit", "rate-burst", "max-concurrent-uploads",
			"max-conns", "max-conns-per-addr", "ipv6-client-prefix", "max-header-size", "min-transfer-rate", "read-timeout", "write-timeout"}},
	},
	"admin list": {
		{whichEntries, slices.Concat([]string{"namespace", "all-namespaces"}, entryFilters, []string{"quarantined"})},
		{"Output", []string{"json"}},
		serverGroup,
	},
	"admin delete": {
		{whichEntries, slices.Concat([]string{"namespace", "all-namespaces", "keys-from", "all"}, entryFilters)},
		{"Confirmation and output", []string{"dry-run", "yes", "json"}},
		serverGroup,
	},
	"admin quarantine": {
		{whichEntries, slices.Concat([]string{"namespace", "all-namespaces"}, entryFilters)},
		{"Reason, confirmation and output", []string{"reason", "dry-run", "yes", "json"}},
		serverGroup,
	},
	"admin export": {
		{whichEntries, slices.Concat([]string{"namespace"}, entryFilters)},
		{"Output", []string{"out"}},
		serverGroup,
	},
	"key": {
		{"Output", []string{"json"}},
		{"Bare module (its signature's fields)", []string{"platform", "platform-version", "jaxlib-version", "backend",
			"module-format", "compile-options", "topology", "codec", "xla-flag"}},
		{"Plugins", []string{"plugins", "wasm-cache", "plugin-pool", "plugin-memory", "plugin-timeout", "max-signature-size"}},
	},
}

// whichEntries heads the admin commands' choice of entries.
const whichEntries = "Which entries"

// entryFilters are the admin commands' filters (filterFlags), in help's order.
var entryFilters = []string{"older-than", "idle-for", "min-size", "max-size", "backend", "run", "writer"}

// serverGroup lists a client command's flags that reach the server.
var serverGroup = flagGroup{"Server", []string{"url", "token", "token-file", "client-cert", "client-key", "timeout"}}
