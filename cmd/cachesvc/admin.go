package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/stats/report"
	"github.com/cachesvc/cachesvc/wire"
)

// adminGroup is `cachesvc admin list|delete|show|export|import|quarantine|restore`.
var adminGroup = group{name: "admin", summary: `Operate a server's entries with an admin token (admin scope in the
namespace; admin on "*" for --all-namespaces).`,
	subs: []command{
		{"list", "list entries by writer, run, backend, age or size", runAdminList},
		{"delete", "delete the entries that pass the same filters (try --dry-run first)", runAdminDelete},
		{"show", "show one entry's provenance: writer, run, times, hits, signature", runAdminShow},
		{"export", "write a namespace's entries, with their metadata and signatures, to a tar", runAdminExport},
		{"import", "load an export tar into a namespace (entries already present are skipped)", runAdminImport},
		{"quarantine", "stop serving entries (by KEY or by filters; try --dry-run first), restorably", runAdminQuarantine},
		{"restore", "serve quarantined entries again", runAdminRestore},
	}}

// runAdmin runs `cachesvc admin <subcommand>`.
func runAdmin(ctx context.Context, args []string, sio stdio) error {
	return adminGroup.run(ctx, args, sio)
}

// adminFlags are the flags every admin subcommand shares: which server, as
// whom, in which namespace (clientFlags: --url, --namespace, --token,
// --token-file), and for how long.
type adminFlags struct {
	clientFlags
	allNS   bool
	timeout time.Duration
}

// register defines the flags on fs; allNS adds --all-namespaces.
func (a *adminFlags) register(fs *flag.FlagSet, allNS bool) {
	a.clientFlags.register(fs, "default", "`namespace` of the entries") // clientflags.go
	if allNS {
		fs.BoolVar(&a.allNS, "all-namespaces", false, "every namespace (needs admin on \"*\"); instead of --namespace")
		commandLineOnly(fs, "all-namespaces")
	}
	durationVar(fs, &a.timeout, "timeout", 0, 0, noLimitOrMore, "give up after this long (0 = no limit; negative is refused)")
}

// client checks the flags and returns a client and the namespace ("" with
// --all-namespaces). args is the command line: a namespace given there
// conflicts with --all-namespaces, one from CACHESVC_NAMESPACE does not.
func (a *adminFlags) client(args []string) (*client.Client, string, error) {
	ns := a.NS
	if a.allNS {
		if flagGiven(args, "namespace") || flagGiven(args, "ns") {
			return nil, "", usagef("give --namespace or --all-namespaces, not both")
		}
		ns = ""
	} else if err := a.checkNamespace(); err != nil {
		return nil, "", err
	}
	cl, err := a.connect(client.Config{UserAgent: "cachesvc-admin"})
	if err != nil {
		return nil, "", err
	}
	return cl, ns, nil
}

// hint adds serverHint's advice to *err when the server could not be
// reached; each subcommand defers it.
func (a *adminFlags) hint(err *error) {
	*err = serverHint(*err, a.Server)
}

// withTimeout bounds ctx by --timeout when it is set.
func (a *adminFlags) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return withTimeout(ctx, a.timeout)
}

// filterFlags are the entry filters of list, delete and export. They are
// read from the command line only.
type filterFlags struct {
	f                  client.EntryFilter
	minSize, maxSize   int64
	olderThan, idleFor string
}

// register defines the filter flags on fs.
func (ff *filterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&ff.f.Writer, "writer", "", "only entries stored by this `writer` (token name, or client address without authentication)")
	fs.StringVar(&ff.f.Run, "run", "", "only entries written by this `run`")
	fs.StringVar(&ff.f.Backend, "backend", "", "only entries of this `backend` (xla, pt2, passthrough, ...)")
	fs.StringVar(&ff.olderThan, "older-than", "", "only entries created longer ago than this `age` (36h, 90m, 30d)")
	fs.StringVar(&ff.idleFor, "idle-for", "", "only entries not accessed for this `age`")
	sizeVar(fs, &ff.minSize, "min-size", 0, "only entries of at least this `size` (512KiB, 10MB)")
	sizeVar(fs, &ff.maxSize, "max-size", 0, "only entries of at most this `size` (0 = no bound)")
	commandLineOnly(fs, "writer", "run", "backend", "older-than", "idle-for", "min-size", "max-size")
}

// filter checks the flags and returns the filter.
func (ff *filterFlags) filter() (client.EntryFilter, error) {
	f := ff.f
	for _, a := range []struct{ flag, v string }{{"older-than", ff.olderThan}, {"idle-for", ff.idleFor}} {
		if a.v == "" {
			continue
		}
		if _, err := wire.ParseAge(a.v); err != nil {
			return f, usagef("--%s: %s", a.flag, err)
		}
	}
	if f.Run != "" {
		if err := manifest.ValidateRun(f.Run); err != nil {
			return f, usagef("--run: %s", err)
		}
	}
	if f.Backend != "" {
		if err := wire.CheckBackend(f.Backend); err != nil {
			return f, usagef("--backend: %s", err)
		}
	}
	if ff.maxSize > 0 && ff.minSize > ff.maxSize {
		return f, usagef("--min-size %s is above --max-size %s: no entry can match", report.Bytes(ff.minSize), report.Bytes(ff.maxSize))
	}
	f.OlderThan, f.IdleFor, f.MinSize, f.MaxSize = ff.olderThan, ff.idleFor, ff.minSize, ff.maxSize
	return f, nil
}

// empty reports whether no filter is set.
func (ff *filterFlags) empty() bool {
	return ff.f == (client.EntryFilter{}) && ff.olderThan == "" && ff.idleFor == "" && ff.minSize == 0 && ff.maxSize == 0
}

// entryPrinter writes entries as a table (or NDJSON with --json), a page
// at a time, so that a long listing neither waits nor piles up.
type entryPrinter struct {
	w      io.Writer
	json   bool
	allNS  bool
	tw     *tabwriter.Writer
	rows   int
	n      int
	bytes  int64
	header bool
}

// add prints e.
func (p *entryPrinter) add(e client.EntryInfo) error {
	p.n++
	p.bytes += e.Size
	if p.json {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	if p.tw == nil {
		p.tw = tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	}
	if !p.header {
		p.header = true
		if p.allNS {
			fmt.Fprint(p.tw, "NAMESPACE\t")
		}
		fmt.Fprintln(p.tw, "KEY\tSIZE\tWRITER\tRUN\tBACKEND\tNAME\tCREATED\tLAST ACCESS\tHITS")
	}
	if p.allNS {
		fmt.Fprintf(p.tw, "%s\t", e.Namespace)
	}
	fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", e.Key, report.Bytes(e.Size), dash(e.Writer), dash(e.Run),
		dash(e.Backend), dash(e.Name), e.Created.UTC().Format(time.RFC3339), e.LastAccess.UTC().Format(time.RFC3339), e.Hits)
	if p.rows++; p.rows == wire.MaxListLimit {
		return p.flush()
	}
	return nil
}

// flush writes the rows held for alignment.
func (p *entryPrinter) flush() error {
	p.rows = 0
	if p.tw == nil {
		return nil
	}
	return p.tw.Flush()
}

// dash is s, or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// where names the namespace ("" for all) in a sentence.
func where(ns string) string {
	if ns == "" {
		return "in every namespace"
	}
	return fmt.Sprintf("in namespace %q", ns)
}

// runAdminList is `cachesvc admin list`.
func runAdminList(ctx context.Context, args []string, sio stdio) (err error) {
	fs := newFlagSet("admin list", "List the entries that pass every filter, in key order, with their size and provenance (a table, or one JSON object per line with --json). Listing does not count as an access.", sio)
	var af adminFlags
	var ff filterFlags
	af.register(fs, true)
	ff.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object per entry")
	quarantined := fs.Bool("quarantined", false, "list the quarantined entries instead, with when, why and whether they can be restored")
	if err := parseOperandless(fs, args, sio); err != nil {
		return err
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
	ctx, cancel := af.withTimeout(ctx)
	defer cancel()
	if *quarantined {
		if ns == "" {
			return usagef("--quarantined lists one namespace: give --namespace, not --all-namespaces")
		}
		return listQuarantined(ctx, cl, ns, f, *asJSON, sio)
	}
	p := &entryPrinter{w: sio.Stdout, json: *asJSON, allNS: ns == ""}
	err = cl.ListEntries(ctx, ns, f, p.add)
	if ferr := p.flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("list entries %s: %w", where(ns), adminHint(err))
	}
	fmt.Fprintf(sio.Stderr, "%s (%s) %s\n", plural(p.n, "entry", "entries"), report.Bytes(p.bytes), where(ns))
	return nil
}

// plural counts n things in words, as `cachesvc stats` does
// (report.Plural): "1 entry", "0 entries", "1,234 entries" (one and many
// are the phrase in the singular and the plural, a verb included when it
// must agree: "entry was", "entries were").
func plural[N ~int | ~int64](n N, one, many string) string {
	return report.Plural(int64(n), one, many)
}
