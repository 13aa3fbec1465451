package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/stats/report"
)

const adminDeleteSummary = `Delete the entries that pass every filter, or the entries named by KEY
arguments or by --keys-from FILE (one KEY a line; - reads stdin) in one
namespace. See them first with --dry-run, which lists exactly what a delete
with the same flags removes and deletes nothing. A delete by filters needs
at least one filter, or --all for every entry of the namespace. A delete
asks before deleting unless --yes is given (and needs --yes when stdin is
not a terminal). Deleted entries are printed like 'admin list' prints them
(by KEY: one line each, or JSON with --json); a KEY not stored makes the
command exit 1 after the others are deleted. Filters, KEYs and
confirmations are read from the command line only, never from CACHESVC_*
variables.`

// runAdminDelete is `cachesvc admin delete`.
func runAdminDelete(ctx context.Context, args []string, sio stdio) (err error) {
	fs := newFlagSet("admin delete [KEY...]", adminDeleteSummary, sio)
	var af adminFlags
	var ff filterFlags
	af.register(fs, true)
	ff.register(fs)
	dry := fs.Bool("dry-run", false, "list what would be deleted; delete nothing")
	all := fs.Bool("all", false, "with no filter: delete every entry of the namespace")
	yes := fs.Bool("yes", false, "delete without asking")
	asJSON := fs.Bool("json", false, "print one JSON object per entry")
	keysFrom := fs.String("keys-from", "", "delete the KEYs in `FILE`, one a line (blank lines and # comments skipped); - reads stdin")
	commandLineOnly(fs, "dry-run", "all", "yes", "keys-from")
	pos, err := parseInterspersed(fs, args, sio)
	if err != nil {
		return err
	}
	if len(pos) > 0 || *keysFrom != "" {
		if !ff.empty() || *all {
			return usagef("give KEYs (arguments or --keys-from) or filters (or --all), not both")
		}
		keys, err := deleteKeys(pos, *keysFrom, sio)
		if err != nil {
			return err
		}
		cl, ns, err := af.client(args)
		if err != nil {
			return err
		}
		if ns == "" {
			return usagef("KEYs name entries of one namespace: give --namespace, not --all-namespaces")
		}
		defer af.hint(&err)
		ctx, cancel := af.withTimeout(ctx)
		defer cancel()
		return deleteByKey(ctx, cl, ns, keys, keyDeleteOptions{dryRun: *dry, yes: *yes, json: *asJSON, server: af.Server, stdinKeys: *keysFrom == "-"}, sio)
	}
	f, err := ff.filter()
	if err != nil {
		return err
	}
	cl, ns, err := af.client(args)
	if err != nil {
		return err
	}
	defer af.hint(&err)
	switch {
	case ff.empty() && !*all:
		return usagef("give KEYs (arguments or --keys-from FILE), at least one filter (--writer, --run, --backend, --older-than, --idle-for, --min-size, --max-size), or --all to delete every entry %s", where(ns))
	case !ff.empty() && *all:
		return usagef("--all means every entry: give it without filters")
	}
	ctx, cancel := af.withTimeout(ctx)
	defer cancel()
	return runBulk(ctx, cl, ns, f, bulkOptions{dryRun: *dry, yes: *yes, json: *asJSON, server: af.Server, verb: "delete", done: "deleted",
		act: func(ctx context.Context, e client.EntryInfo) error { return cl.Delete(ctx, e.Namespace, e.Key) }}, sio)
}

// bulkOptions say what runBulk does to each entry that passes the filter.
type bulkOptions struct {
	dryRun, yes, json bool
	server            string
	verb, done        string // "delete", "deleted"
	// act does it to one entry; a 404 means the entry is already gone.
	act func(ctx context.Context, e client.EntryInfo) error
}

// runBulk lists the entries of ns that pass f and, unless it is a dry run,
// acts on each after asking (or with --yes), printing each entry acted on
// as the listing prints it. A dry run prints exactly the entries the same
// command without --dry-run acts on, if nothing changes in between.
func runBulk(ctx context.Context, cl *client.Client, ns string, f client.EntryFilter, o bulkOptions, sio stdio) error {
	p := &entryPrinter{w: sio.Stdout, json: o.json, allNS: ns == ""}
	if o.dryRun {
		err := cl.ListEntries(ctx, ns, f, p.add)
		if ferr := p.flush(); err == nil {
			err = ferr
		}
		if err != nil {
			return fmt.Errorf("list entries %s: %w", where(ns), adminHint(err))
		}
		fmt.Fprintf(sio.Stderr, "dry run: would %s %s (%s) %s; nothing was changed\n", o.verb, plural(p.n, "entry", "entries"), report.Bytes(p.bytes), where(ns))
		return nil
	}
	total := -1
	if !o.yes {
		n, ok, err := confirmBulk(ctx, cl, ns, f, o, sio)
		if err != nil || !ok {
			return err
		}
		total = n
	}
	bar := newBar(sio, total, o.verb)
	gone := 0
	err := cl.ListEntries(ctx, ns, f, func(e client.EntryInfo) error {
		if err := o.act(ctx, e); client.IsNotFound(err) {
			gone++
			return nil
		} else if err != nil {
			return fmt.Errorf("%s %s/%s: %w", o.verb, e.Namespace, e.Key, err)
		}
		bar.add(1)
		return p.add(e)
	})
	bar.finish()
	if ferr := p.flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("%w (%s %s before it; run again to go on)", adminHint(err), plural(p.n, "entry was", "entries were"), o.done)
	}
	fmt.Fprintf(sio.Stderr, "%s %s (%s) %s", o.done, plural(p.n, "entry", "entries"), report.Bytes(p.bytes), where(ns))
	if gone > 0 {
		fmt.Fprintf(sio.Stderr, "; %s already gone", plural(gone, "was", "were"))
	}
	fmt.Fprintln(sio.Stderr)
	return nil
}

// confirmBulk counts what runBulk would act on and asks on the terminal.
// ok is false when the answer is no, or nothing matches.
func confirmBulk(ctx context.Context, cl *client.Client, ns string, f client.EntryFilter, o bulkOptions, sio stdio) (n int, ok bool, err error) {
	in, isFile := sio.Stdin.(*os.File)
	if !isFile || !term.IsTerminal(int(in.Fd())) {
		return 0, false, usagef("%s needs --yes when stdin is not a terminal (see what it changes with --dry-run first)", o.verb)
	}
	var bytes int64
	if err := cl.ListEntries(ctx, ns, f, func(e client.EntryInfo) error { n++; bytes += e.Size; return nil }); err != nil {
		return 0, false, fmt.Errorf("list entries %s: %w", where(ns), adminHint(err))
	}
	if n == 0 {
		fmt.Fprintf(sio.Stderr, "no entries match %s; nothing to %s\n", where(ns), o.verb)
		return 0, false, nil
	}
	fmt.Fprintf(sio.Stderr, "%s %s (%s) %s on %s? [y/N] ", strings.ToUpper(o.verb[:1])+o.verb[1:], plural(n, "entry", "entries"), report.Bytes(bytes), where(ns), o.server)
	line, _ := bufio.NewReader(sio.Stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		fmt.Fprintln(sio.Stderr, "nothing changed")
		return 0, false, nil
	}
	return n, true, nil
}

// adminHint adds what to do to an authentication or authorization error,
// once however many callers pass it on.
func adminHint(err error) error {
	var e *client.Error
	var h hinted
	if errors.As(err, &h) || !errors.As(err, &e) {
		return err
	}
	switch e.Status {
	case http.StatusUnauthorized:
		return hinted{fmt.Errorf("%w (give an admin token with --token-file or CACHESVC_TOKEN_FILE)", err)}
	case http.StatusForbidden:
		return hinted{fmt.Errorf("%w (admin commands need a token with admin scope there: see 'cachesvc token new --scopes NS:admin')", err)}
	}
	return err
}

// hinted is an error adminHint has already added what to do to.
type hinted struct{ error }

// Unwrap returns the error with its hint.
func (h hinted) Unwrap() error { return h.error }

// bar is a progress bar on a terminal's stderr, and nothing otherwise.
type bar struct{ b *progressbar.ProgressBar }

// newBar returns a bar counting to total (-1: unknown) when stderr is a
// terminal.
func newBar(sio stdio, total int, what string) *bar {
	if !isTerminal(sio.Stderr) {
		return &bar{}
	}
	return &bar{b: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(sio.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

// newBytesBar is newBar counting bytes.
func newBytesBar(sio stdio, total int64, what string) *bar {
	if !isTerminal(sio.Stderr) {
		return &bar{}
	}
	return &bar{b: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(sio.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

func (b *bar) add(n int) {
	if b.b != nil {
		_ = b.b.Add(n)
	}
}

func (b *bar) finish() {
	if b.b != nil {
		_ = b.b.Finish()
	}
}

// writer returns an io.Writer that advances the bar by what is written.
func (b *bar) writer() io.Writer {
	if b.b == nil {
		return io.Discard
	}
	return b.b
}
