// Command cachesvc is the shared compile cache: its server and its tools.
//
// Usage:
//
//	cachesvc <command> [flags]
//
// Run `cachesvc --help` for the list of commands and `cachesvc <command> --help`
// for a command's flags. A flag can also be set from the environment as
// CACHESVC_<FLAG_NAME> (for example --max-entry-size from
// CACHESVC_MAX_ENTRY_SIZE), except admin's filters and confirmations; a
// flag given on the command line wins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// command is one subcommand: its name, a one-line help and the function that
// runs it. run returns nil on success; a usageError exits 2, any other error 1.
// A command that SIGINT or SIGTERM stopped exits 128 + the signal (130, 143)
// whatever it returned, unless it is a daemon that stopped cleanly
// (stdio.markDaemon): that is a success.
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
	{"version", "print the version and the data formats this binary reads", runVersion},
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
	// state, set by dispatch, is what the command tells it about itself
	// (interrupt.go); nil for a command function called directly.
	state *cmdState
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
	ctx, stop := notifyInterrupt(context.Background()) // interrupt.go
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
		state := &cmdState{}
		sio.state = state
		err := c.run(ctx, args[1:], sio)
		if in, ok := interruptOf(ctx); ok && stoppedBy(err, state.daemon) {
			// What the command cleans up on an error it has cleaned up
			// (an export's partial file is removed): say what it did not
			// finish, and that a signal stopped it.
			msg := in.Error()
			if err != nil && !errors.Is(err, flag.ErrHelp) {
				if msg = err.Error(); !strings.Contains(msg, in.Error()) {
					msg += " (" + in.Error() + ")"
				}
			}
			reportError(sio, errPath(c.name, err), msg)
			return in.exitCode()
		}
		var ue *usageError
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ue):
			path := errPath(c.name, err)
			reportError(sio, path, ue.msg)
			fmt.Fprintf(sio.Stderr, "Run 'cachesvc %s --help' for usage.\n", path)
			return 2
		default:
			reportError(sio, errPath(c.name, err), err.Error())
			return 1
		}
	}
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	if hint := didYouMean(name, "", names); hint != "" { // suggest.go
		// The one line says what to type; the command list would bury it.
		fmt.Fprintf(sio.Stderr, "cachesvc: unknown command %q%s\nRun 'cachesvc --help' for the commands.\n", name, hint)
		return 2
	}
	fmt.Fprintf(sio.Stderr, "cachesvc: unknown command %q\n\n", name)
	printUsage(sio.Stderr)
	return 2
}

// errPath is the command path an error of command name is reported under:
// the subcommand a usageError or cmdError names, else name.
func errPath(name string, err error) string {
	var ue *usageError
	if errors.As(err, &ue) && ue.cmd != "" {
		return ue.cmd
	}
	if ce := (*cmdError)(nil); errors.As(err, &ce) {
		return ce.cmd
	}
	return name
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
	fmt.Fprintf(w, "A flag can also be set as CACHESVC_<FLAG_NAME>, e.g. CACHESVC_MAX_SIZE=10GiB, unless its\n")
	fmt.Fprintf(w, "help says [command line only] (admin's filters and confirmations).\n")
	fmt.Fprintf(w, "\nExit status: 0 success, 1 failure, 2 bad command line, 130 interrupted by SIGINT (Ctrl-C),\n")
	fmt.Fprintf(w, "143 by SIGTERM. serve, and agent while watching, stop cleanly on either and exit 0.\n")
}
