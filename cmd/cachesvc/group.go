package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// group is a command made of subcommands (`cachesvc plugin list`).
type group struct {
	name    string
	summary string
	subs    []command
}

// run runs the subcommand args[0] with the remaining args. `GROUP --help`
// and `GROUP help` print the group's help; `GROUP help SUB` is
// `GROUP SUB --help`.
func (g group) run(ctx context.Context, args []string, sio stdio) error {
	if len(args) == 0 {
		return usagef("missing subcommand: use %s", g.names())
	}
	if isHelp(args[0]) {
		if args[0] == "help" && len(args) > 1 {
			return g.run(ctx, []string{args[1], "--help"}, sio)
		}
		g.writeHelp(sio.Stdout)
		return nil
	}
	for _, c := range g.subs {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], sio)
		if ue := (*usageError)(nil); errors.As(err, &ue) {
			if ue.cmd == "" {
				ue.cmd = g.name + " " + c.name
			}
			return err
		}
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			return &cmdError{cmd: g.name + " " + c.name, err: err}
		}
		return err
	}
	var names []string
	for _, c := range g.subs {
		names = append(names, c.name)
	}
	return usagef("unknown subcommand %q%s: use %s", args[0], didYouMean(args[0], "", names), g.names())
}

// names lists the subcommands as "list or check".
func (g group) names() string {
	var n []string
	for _, c := range g.subs {
		n = append(n, c.name)
	}
	if len(n) < 2 {
		return strings.Join(n, "")
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// writeHelp writes the group's usage, summary and subcommands to w.
func (g group) writeHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: cachesvc %s <command> [flags]\n\n%s\n\nCommands:\n", g.name, g.summary)
	for _, c := range g.subs {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.help)
	}
	fmt.Fprintf(w, "\nRun 'cachesvc %s <command> --help' for a command's flags.\n", g.name)
}

// cmdError is a subcommand's error, with the subcommand's path for the
// "cachesvc PATH: " prefix run prints.
type cmdError struct {
	cmd string
	err error
}

func (e *cmdError) Error() string { return e.err.Error() }
func (e *cmdError) Unwrap() error { return e.err }
