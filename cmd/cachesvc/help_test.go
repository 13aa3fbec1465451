package main

import (
	"bytes"
	"context"
	"flag"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// commandFlags is what each command's flag set must hold: its flags by
// name, aliases excluded (they are checked against their target). A flag
// here that a command does not use, or one missing, is a defect of the
// command, so a new flag or command is added here deliberately.
var commandFlags = map[string][]string{
	"serve": {"addr", "advertise-url", "data", "digest-lookups", "expiry-interval", "insecure-no-auth", "ipv6-client-prefix", "log-format", "log-level", "max-concurrent-uploads",
		"max-conns", "max-conns-per-addr", "max-entry-size", "max-header-size", "max-signature-size", "max-size", "min-transfer-rate", "namespaces", "plugin-memory",
		"plugin-pool", "plugin-timeout", "plugins", "pprof-addr", "quarantine-after", "rate-burst", "rate-limit", "read-timeout",
		"redis-addr", "redis-idle-timeout", "redis-max-buffered", "redis-max-conns", "redis-max-value", "redis-namespace", "replica-id",
		"s3-bucket", "s3-check-then-write", "s3-credentials-file", "s3-endpoint", "s3-insecure", "s3-prefix",
		"s3-profile", "s3-region", "shutdown-delay", "shutdown-grace", "signature-memo-entries", "signing-key", "sync-writes", "tls-cert", "tls-client-ca",
		"tls-key", "tokens", "trusted-proxies", "upload-queue-entries", "upload-queue-size", "wasm-cache", "write-mode", "write-timeout"},
	"token new":   {"name", "scopes"},
	"signkey new": {"out"},
	"stats":       {"namespace", "scope", "timeout", "token", "token-file", "client-cert", "client-key", "url", "json"},
	"warm": {"chunk-size", "jax-cache-dir", "manifest", "namespace", "python", "run", "stall-timeout", "token",
		"token-file", "client-cert", "client-key", "torch", "torch-cache-dir", "url", "verify-key"},
	"agent": {"interval", "jax-cache-dir", "namespace", "once", "run", "stall-timeout", "state-file", "token", "token-file", "client-cert", "client-key",
		"url", "verify-key", "warm-run"},
	"gc": {"dry-run", "grace", "json", "older-than", "s3-bucket", "s3-credentials-file", "s3-endpoint",
		"s3-insecure", "s3-prefix", "s3-profile", "s3-region"},
	"key": {"backend", "codec", "compile-options", "jaxlib-version", "json", "max-signature-size", "module-format",
		"platform", "platform-version", "plugin-memory", "plugin-pool", "plugin-timeout", "plugins", "topology",
		"wasm-cache", "xla-flag"},
	"plugin list": {"json", "plugin-memory", "plugin-timeout", "plugins", "wasm-cache"},
	"plugin check": {"codec", "compile-options", "corpus", "jaxlib-version", "json", "max-signature-size",
		"module-format", "platform", "platform-version", "plugin-memory", "plugin-timeout", "topology",
		"wasm-cache", "xla-flag"},
	"admin list": {"all-namespaces", "backend", "idle-for", "json", "max-size", "min-size", "namespace", "older-than",
		"quarantined", "run", "timeout", "token", "token-file", "client-cert", "client-key", "url", "writer"},
	"admin delete": {"all", "all-namespaces", "backend", "dry-run", "idle-for", "json", "keys-from", "max-size", "min-size",
		"namespace", "older-than", "run", "timeout", "token", "token-file", "client-cert", "client-key", "url", "writer", "yes"},
	"admin show": {"json", "namespace", "timeout", "token", "token-file", "client-cert", "client-key", "url", "verify-key"},
	"admin export": {"backend", "idle-for", "max-size", "min-size", "namespace", "older-than", "out", "run",
		"timeout", "token", "token-file", "client-cert", "client-key", "url", "writer"},
	"admin import": {"namespace", "timeout", "token", "token-file", "client-cert", "client-key", "url", "verify-key"},
	"admin quarantine": {"all-namespaces", "backend", "dry-run", "idle-for", "json", "max-size", "min-size",
		"namespace", "older-than", "reason", "run", "timeout", "token", "token-file", "client-cert", "client-key", "url", "writer", "yes"},
	"admin restore": {"namespace", "timeout", "token", "token-file", "client-cert", "client-key", "url"},
	"version":       {},
}

var (
	// A flag is written as it is typed: -o for a one-letter name, --name
	// for a longer one (the dashes are captured to check that).
	helpFlagRE  = regexp.MustCompile(`(?m)^  (--?)([a-zA-Z0-9-]+)`)
	helpAliasRE = regexp.MustCompile(`\(alias (--?)([a-zA-Z0-9-]+)\)`)
	helpValueRE = regexp.MustCompile(`(?m)^  --([a-z0-9-]+) value\b`)
)

// helpRun runs `cachesvc args...` in-process and returns the exit code,
// stdout, stderr and the flag sets parsed, by name.
func helpRun(t *testing.T, args ...string) (int, string, string, map[string]*flag.FlagSet) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	sets := map[string]*flag.FlagSet{}
	sio := stdio{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		Getenv:       func(string) string { return "" },
		observeFlags: func(fs *flag.FlagSet) { sets[strings.TrimPrefix(fs.Name(), "cachesvc ")] = fs }}
	code := dispatch(context.Background(), args, sio)
	return code, stdout.String(), stderr.String(), sets
}

// subcommandsIn returns the names listed under "Commands:" in a help text.
func subcommandsIn(help string) []string {
	_, list, ok := strings.Cut(help, "\nCommands:\n")
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		names = append(names, strings.Fields(line)[0])
	}
	return names
}

// TestHelpEveryCommand walks every command the help texts list, nested ones
// included, and checks that `--help` exits 0 with the help on stdout, that
// `cachesvc help PATH` prints the same, and that the flags listed are exactly
// the flags the command registers, which are the ones commandFlags says it
// has (so no command lists another's flags).
func TestHelpEveryCommand(t *testing.T) {
	code, top, _, _ := helpRun(t, "--help")
	if code != 0 {
		t.Fatalf("cachesvc --help: exit %d", code)
	}
	seen := map[string]bool{}
	var walk func(path []string)
	walk = func(path []string) {
		name := strings.Join(path, " ")
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			code, out, errOut, sets := helpRun(t, append(slices.Clone(path), "--help")...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if !strings.HasPrefix(out, "Usage: cachesvc "+name) {
				t.Errorf("help does not start with its usage line:\n%s", out)
			}
			hcode, hout, _, _ := helpRun(t, append([]string{"help"}, path...)...)
			if hcode != code || hout != out {
				t.Errorf("`cachesvc help %s` (exit %d) differs from `cachesvc %s --help`:\n%s", name, hcode, name, hout)
			}
			if subs := subcommandsIn(out); len(subs) > 0 {
				for _, s := range subs {
					walk(append(slices.Clone(path), s))
				}
				return
			}
			fs := sets[name]
			if fs == nil {
				t.Fatalf("no flag set named %q was parsed", "cachesvc "+name)
			}
			var registered []string
			aliases := map[string]string{}
			fs.VisitAll(func(f *flag.Flag) {
				if a, ok := f.Value.(*aliasValue); ok {
					aliases[f.Name] = a.to
					return
				}
				registered = append(registered, f.Name)
			})
			var listed []string
			for _, m := range append(helpFlagRE.FindAllStringSubmatch(out, -1), helpAliasRE.FindAllStringSubmatch(out, -1)...) {
				if want := flagName(m[2]); m[1]+m[2] != want {
					t.Errorf("help shows %s%s: write it %s", m[1], m[2], want)
				}
			}
			for _, m := range helpFlagRE.FindAllStringSubmatch(out, -1) {
				listed = append(listed, m[2])
			}
			// A grouped command (flagGroups) lists its flags in its
			// groups' order: the same flags, each once.
			slices.Sort(listed)
			if !slices.Equal(listed, registered) {
				t.Errorf("help lists flags %v, the command registers %v", listed, registered)
			}
			for alias, to := range aliases {
				line := regexp.MustCompile(`(?m)^  --?` + regexp.QuoteMeta(to) + `\b.*$`).FindString(out)
				if !slices.ContainsFunc(helpAliasRE.FindAllStringSubmatch(line, -1), func(m []string) bool { return m[2] == alias }) {
					t.Errorf("help does not show %s as an alias on --%s's line %q", flagName(alias), to, line)
				}
			}
			// The top-level help's word on the environment holds for
			// every command: admin's filters are command line only.
			if strings.Contains(out, "[command line only]") && strings.Contains(top, "Every flag") {
				t.Errorf("the top-level help says every flag comes from the environment, but %s has flags that are command line only", name)
			}
			// flag.UnquoteUsage names every custom Value "value", which
			// tells a user nothing: each flag names what it takes.
			for _, m := range helpValueRE.FindAllStringSubmatch(out, -1) {
				t.Errorf("help shows --%s as taking a bare \"value\": name what it takes (a size, a string...)", m[1])
			}
			want, ok := commandFlags[name]
			if !ok {
				t.Fatalf("add %q to commandFlags with its flags %q", name, registered)
			}
			want = slices.Clone(want)
			sort.Strings(want)
			if !slices.Equal(registered, want) {
				t.Errorf("flags %v, want %v", registered, want)
			}
		})
	}
	for _, c := range subcommandsIn(top) {
		walk([]string{c})
	}
	for _, c := range commands {
		if !seen[c.name] {
			t.Errorf("command %q is missing from the top-level help", c.name)
		}
	}
	for name := range commandFlags {
		if !seen[name] {
			t.Errorf("commandFlags names %q, which no help lists", name)
		}
	}
}

// TestHelpOnUsageError: a bad command line prints the error once and a
// pointer to the nested command's help on stderr, not the whole help.
func TestHelpOnUsageError(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"plugin", "check", "--bogus"}, "cachesvc plugin check: unknown flag --bogus\nRun 'cachesvc plugin check --help' for usage.\n"},
		{[]string{"token", "new"}, "cachesvc token new: --name is required\nRun 'cachesvc token new --help' for usage.\n"},
		{[]string{"plugin"}, "cachesvc plugin: missing subcommand: use list or check\nRun 'cachesvc plugin --help' for usage.\n"},
		{[]string{"signkey", "old"}, "cachesvc signkey: unknown subcommand \"old\": use new\nRun 'cachesvc signkey --help' for usage.\n"},
		{[]string{"version", "extra"}, "cachesvc version: unexpected arguments: extra\nRun 'cachesvc version --help' for usage.\n"},
		// A misspelt flag, subcommand or command names the one meant.
		{[]string{"serve", "--adr", "127.0.0.1:0"}, "cachesvc serve: unknown flag --adr (did you mean --addr?)\nRun 'cachesvc serve --help' for usage.\n"},
		{[]string{"stats", "--namsepace=team"}, "cachesvc stats: unknown flag --namsepace (did you mean --namespace?)\nRun 'cachesvc stats --help' for usage.\n"},
		{[]string{"warm", "-jax-cache-dr", "d"}, "cachesvc warm: unknown flag --jax-cache-dr (did you mean --jax-cache-dir?)\nRun 'cachesvc warm --help' for usage.\n"},
		{[]string{"stats", "--jsn"}, "cachesvc stats: unknown flag --jsn (did you mean --json?)\nRun 'cachesvc stats --help' for usage.\n"},
		{[]string{"serve", "--max-entry", "1GiB"}, "cachesvc serve: unknown flag --max-entry (did you mean --max-entry-size?)\nRun 'cachesvc serve --help' for usage.\n"},
		{[]string{"admin", "lst"}, "cachesvc admin: unknown subcommand \"lst\" (did you mean list?): use list, delete, show, export, import, quarantine or restore\nRun 'cachesvc admin --help' for usage.\n"},
		{[]string{"stat"}, "cachesvc: unknown command \"stat\" (did you mean stats?)\nRun 'cachesvc --help' for the commands.\n"},
		{[]string{"help", "stat"}, "cachesvc: unknown command \"stat\" (did you mean stats?)\nRun 'cachesvc --help' for the commands.\n"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut, _ := helpRun(t, tc.args...)
			if code != 2 || out != "" || errOut != tc.want {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, stderr %q", code, out, errOut, tc.want)
			}
		})
	}
}
