// Command cachesvc is the shared compile cache: its server and its tools.
//
// Usage:
//
//	cachesvc <command> [flags]
//
// Run `cachesvc --help` for the list of commands and `cachesvc <command> --help`
// for a command's flags. Every flag can also be set from the environment as
// CACHESVC_<FLAG_NAME> (for example --max-entry-size from
// CACHESVC_MAX_ENTRY_SIZE); a flag given on the command line wins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand: its name, a one-line help and the function that
// runs it. run returns nil on success; a usageError exits 2, any other error 1.
type command struct {
	name string
	help string
	run  func(ctx context.Context, args []string, sio stdio) error
}

// commands is the subcommand table. Each subcommand lives in its own file;
// add it here with one line.
var commands = []command{
	{"serve", "run the cache server", runServe},
	{"token", "make a bearer token and its tokens-file line", runToken},
	{"signkey", "make an Ed25519 key pair for signing entries", runSignKey},
	{"stats", "print hit rates, time saved, runs and misses as tables", runStats},
	{"warm", "fill a JAX cache directory from a run's entries, or torch's from its Mega-Cache (--torch)", runWarm},
	{"agent", "sync a JAX cache directory to the server (upload new entries)", runAgent},
	{"gc", "remove what no replica used for a given age from the shared S3 tier", runGc},
	{"key", "print the cache key of a signature or module, offline", runKey},
	{"plugin", "list plugins, or check a plugin against the ABI", runPlugin},
	{"admin", "list, delete, quarantine, show, export and import entries with an admin token", runAdmin},
	{"version", "print the version and exit", runVersion},
}

// stdio bundles a command's standard streams and its environment, so that
// tests can run commands in-process.
type stdio struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv looks up environment variables; nil means os.Getenv.
	Getenv func(string) string
	// observeFlags, when set (by tests), sees each flag set parseFlags
	// parses, before it parses.
	observeFlags func(*flag.FlagSet)
}

// getenv looks up key through s.Getenv, or os.Getenv when it is nil.
func (s stdio) getenv(key string) string {
	if s.Getenv == nil {
		return os.Getenv(key)
	}
	return s.Getenv(key)
}

// usageError is a bad command line; run prints it with the usage hint and
// exits 2.
type usageError struct {
	msg string
	// cmd is the command path whose --help the hint names ("plugin
	// check"); empty means the top-level command's.
	cmd string
}

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// isHelp reports whether arg asks for help in place of a subcommand
// (`cachesvc plugin --help`).
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches args to a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return dispatch(ctx, args, stdio{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// dispatch runs the subcommand args name with sio and returns the exit code.
// `cachesvc help CMD [SUB]` is `cachesvc CMD [SUB] --help`.
func dispatch(ctx context.Context, args []string, sio stdio) int {
	if len(args) == 0 {
		printUsage(sio.Stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		printUsage(sio.Stdout)
		return 0
	case "help":
		if len(args) == 1 {
			printUsage(sio.Stdout)
			return 0
		}
		return dispatch(ctx, append(args[1:len(args):len(args)], "--help"), sio)
	case "-version", "--version":
		name = "version"
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		err := c.run(ctx, args[1:], sio)
		var ue *usageError
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ue):
			path := c.name
			if ue.cmd != "" {
				path = ue.cmd
			}
			reportError(sio, path, ue.msg)
			fmt.Fprintf(sio.Stderr, "Run 'cachesvc %s --help' for usage.\n", path)
			return 2
		default:
			path := c.name
			if ce := (*cmdError)(nil); errors.As(err, &ce) {
				path = ce.cmd
			}
			reportError(sio, path, err.Error())
			return 1
		}
	}
	fmt.Fprintf(sio.Stderr, "cachesvc: unknown command %q\n\n", name)
	printUsage(sio.Stderr)
	return 2
}

// observeError, when set (by tests), sees the message of every error a
// command ends with, as printed after "cachesvc CMD: ".
var observeError func(cmd, msg string)

// reportError prints a command's final error to stderr.
func reportError(sio stdio, cmd, msg string) {
	if observeError != nil {
		observeError(cmd, msg)
	}
	fmt.Fprintf(sio.Stderr, "cachesvc %s: %s\n", cmd, msg)
}

// printUsage writes the command list to w.
func printUsage(w io.Writer) {
	fmt.Fprintf(w, "cachesvc is a shared, persistent compile cache for ML compilers.\n\n")
	fmt.Fprintf(w, "Usage:\n  cachesvc <command> [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.help)
	}
	fmt.Fprintf(w, "\nRun 'cachesvc help <command>' or 'cachesvc <command> --help' for a command's flags.\n")
	fmt.Fprintf(w, "Every flag can also be set as CACHESVC_<FLAG_NAME>, e.g. CACHESVC_MAX_SIZE=10GiB.\n")
}
