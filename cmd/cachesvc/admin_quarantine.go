package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/stats/report"
	"github.com/cachesvc/cachesvc/wire"
)

const adminQuarantineSummary = `Quarantine entries: they are no longer served (a lookup misses), stay
listed by 'cachesvc admin list --quarantined', and 'cachesvc admin restore'
serves them again. Name the entries as KEY arguments, or select them with
filters like 'admin delete' (see them first with --dry-run; a filtered
quarantine asks before acting unless --yes is given). Filters and
confirmations are read from the command line only. --reason is required.`

// runAdminQuarantine is `cachesvc admin quarantine`.
func runAdminQuarantine(ctx context.Context, args []string, sio stdio) (err error) {
	fs := newFlagSet("admin quarantine [KEY...]", adminQuarantineSummary, sio)
	var af adminFlags
	var ff filterFlags
	af.register(fs, true)
	ff.register(fs)
	reason := fs.String("reason", "", "why, recorded with the quarantine (required)")
	dry := fs.Bool("dry-run", false, "list what would be quarantined; change nothing")
	yes := fs.Bool("yes", false, "quarantine without asking")
	asJSON := fs.Bool("json", false, "print one JSON object per entry")
	commandLineOnly(fs, "reason", "dry-run", "yes")
	keys, err := parseInterspersed(fs, args, sio)
	if err != nil {
		return err
	}
	if strings.TrimSpace(*reason) == "" {
		return usagef("--reason is required: say why (it is kept with the quarantine)")
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
	act := func(ctx context.Context, e client.EntryInfo) error {
		_, err := cl.Quarantine(ctx, e.Namespace, e.Key, *reason)
		return err
	}
	if len(keys) == 0 {
		if ff.empty() {
			return usagef("name the entries (KEY arguments) or give at least one filter (--writer, --run, --backend, --older-than, --idle-for, --min-size, --max-size)")
		}
		return runBulk(ctx, cl, ns, f, bulkOptions{dryRun: *dry, yes: *yes, json: *asJSON, server: af.Server,
			verb: "quarantine", done: "quarantined", act: act}, sio)
	}
	if !ff.empty() || ns == "" {
		return usagef("give KEY arguments or filters, not both (and KEYs with --namespace, not --all-namespaces)")
	}
	if err := checkKeys(keys); err != nil {
		return err
	}
	for _, k := range keys {
		if *dry {
			fmt.Fprintf(sio.Stdout, "would quarantine %s/%s\n", ns, k)
			continue
		}
		if err := act(ctx, client.EntryInfo{Namespace: ns, Key: k}); err != nil {
			return fmt.Errorf("quarantine %s/%s: %w", ns, k, adminHint(err))
		}
		fmt.Fprintf(sio.Stdout, "quarantined %s/%s\n", ns, k)
	}
	return nil
}

// checkKeys checks KEY arguments.
func checkKeys(keys []string) error {
	for _, k := range keys {
		if _, err := cachekey.ParseKey(k); err != nil {
			return usagef("KEY %q: %s", k, err)
		}
	}
	return nil
}

// runAdminRestore is `cachesvc admin restore KEY...`.
func runAdminRestore(ctx context.Context, args []string, sio stdio) (err error) {
	fs := newFlagSet("admin restore KEY...", "Serve quarantined entries again (their reports are cleared).", sio)
	var af adminFlags
	af.register(fs, false)
	keys, err := parseInterspersed(fs, args, sio)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return usagef("name the entries to restore (KEY arguments; 'cachesvc admin list --quarantined' lists them)")
	}
	if err := checkKeys(keys); err != nil {
		return err
	}
	cl, ns, err := af.client(args)
	if err != nil {
		return err
	}
	defer af.hint(&err)
	ctx, cancel := af.withTimeout(ctx)
	defer cancel()
	for _, k := range keys {
		if _, err := cl.Restore(ctx, ns, k); err != nil {
			if client.IsNotFound(err) {
				return fmt.Errorf("restore %s/%s: %w (list what can be restored with 'cachesvc admin list --quarantined --namespace %s')", ns, k, err, ns)
			}
			return fmt.Errorf("restore %s/%s: %w", ns, k, adminHint(err))
		}
		fmt.Fprintf(sio.Stdout, "restored %s/%s\n", ns, k)
	}
	return nil
}

// listQuarantined prints the quarantined entries of ns that pass f.
func listQuarantined(ctx context.Context, cl *client.Client, ns string, f client.EntryFilter, asJSON bool, sio stdio) error {
	tw := tabwriter.NewWriter(sio.Stdout, 0, 0, 2, ' ', 0)
	n, rows := 0, 0
	var bytes int64
	now := time.Now()
	err := cl.ListQuarantined(ctx, ns, func(e client.QuarantinedEntry) error {
		if !f.Match(e.EntryInfo, now) {
			return nil
		}
		n++
		bytes += e.Size
		if asJSON {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(sio.Stdout, "%s\n", b)
			return err
		}
		if n == 1 {
			fmt.Fprintln(tw, "KEY\tSIZE\tWRITER\tRUN\tQUARANTINED\tCAUSE\tREPORTS\tRESTORABLE\tREASON")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%t\t%s\n", e.Key, report.Bytes(e.Size), dash(e.Writer), dash(e.Run),
			e.QuarantinedAt.UTC().Format(time.RFC3339), e.Cause, e.Reports, e.Restorable, wire.OneLine(e.Reason, 80))
		if rows++; rows == 1000 {
			rows = 0
			return tw.Flush()
		}
		return nil
	})
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("list quarantined entries %s: %w", where(ns), adminHint(err))
	}
	fmt.Fprintf(sio.Stderr, "%s (%s) %s\n", plural(n, "quarantined entry", "quarantined entries"), report.Bytes(bytes), where(ns))
	return nil
}
