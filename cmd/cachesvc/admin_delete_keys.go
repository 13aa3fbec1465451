package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/stats/report"
)

// maxDeleteKeys bounds the KEYs one `admin delete` takes: they are all read
// and checked before anything is deleted, so a typo on line 90,000 deletes
// nothing. More must be split into several runs.
const maxDeleteKeys = 100_000

// deleteKeys returns the KEYs of `admin delete`: the arguments, then the
// lines of --keys-from (blank lines and # comments skipped), each checked.
func deleteKeys(args []string, from string, sio stdio) ([]string, error) {
	if err := checkKeys(args); err != nil {
		return nil, err
	}
	keys := args
	if from == "" {
		return keys, nil
	}
	var r io.Reader = sio.Stdin
	name := "stdin"
	if from != "-" {
		f, err := os.Open(from)
		if err != nil {
			return nil, usagef("--keys-from: %s", err)
		}
		defer f.Close()
		r, name = f, from
	}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		k := strings.TrimSpace(sc.Text())
		if k == "" || strings.HasPrefix(k, "#") {
			continue
		}
		if err := checkKeys([]string{k}); err != nil {
			return nil, usagef("--keys-from %s, line %d: %s (nothing was deleted)", name, line, err)
		}
		if len(keys) == maxDeleteKeys {
			return nil, usagef("--keys-from %s: more than %d KEYs; split the list and run once per part (nothing was deleted)", name, maxDeleteKeys)
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, usagef("--keys-from %s: a line is too long to be a KEY (nothing was deleted)", name)
		}
		return nil, fmt.Errorf("--keys-from %s: %w (nothing was deleted)", name, err)
	}
	if len(keys) == 0 {
		return nil, usagef("--keys-from %s holds no KEYs; nothing to delete", name)
	}
	return keys, nil
}

// keyDeleteOptions say how deleteByKey asks and prints.
type keyDeleteOptions struct {
	dryRun, yes, json bool
	server            string
	// stdinKeys: the KEYs came from stdin, so it cannot answer a question.
	stdinKeys bool
}

// keyResult is one line of `admin delete KEY... --json`.
type keyResult struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	// Status is "deleted", "would_delete" or "not_found".
	Status string `json:"status"`
	// Size is the entry's size in bytes (dry run only).
	Size int64 `json:"size,omitempty"`
}

// deleteByKey deletes the entries keys of ns (DELETE /v1/{ns}/entries/{key}
// each), or with a dry run says which exist. A KEY not stored is reported
// and makes it fail once the others are deleted.
func deleteByKey(ctx context.Context, cl *client.Client, ns string, keys []string, o keyDeleteOptions, sio stdio) error {
	say := func(r keyResult) error {
		if o.json {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(sio.Stdout, "%s\n", b)
			return err
		}
		verb := map[string]string{"deleted": "deleted", "would_delete": "would delete", "not_found": "not found:"}[r.Status]
		_, err := fmt.Fprintf(sio.Stdout, "%s %s/%s\n", verb, r.Namespace, r.Key)
		return err
	}
	var missing []string
	if o.dryRun {
		n := 0
		var bytes int64
		for _, k := range keys {
			e, err := cl.EntryMeta(ctx, ns, k)
			r := keyResult{Namespace: ns, Key: k, Status: "would_delete", Size: e.Size}
			switch {
			case client.IsNotFound(err):
				r.Status = "not_found"
				missing = append(missing, k)
			case err != nil:
				return fmt.Errorf("look up %s/%s: %w", ns, k, adminHint(err))
			default:
				n++
				bytes += e.Size
			}
			if err := say(r); err != nil {
				return err
			}
		}
		fmt.Fprintf(sio.Stderr, "dry run: would delete %s (%s) %s", plural(n, "entry", "entries"), report.Bytes(bytes), where(ns))
		if len(missing) > 0 {
			fmt.Fprintf(sio.Stderr, "; %s not stored", plural(len(missing), "KEY is", "KEYs are"))
		}
		fmt.Fprintln(sio.Stderr, "; nothing was changed")
		return nil
	}
	if !o.yes {
		if o.stdinKeys {
			return usagef("--keys-from - reads the KEYs from stdin, which then cannot answer; give --yes (see what it deletes with --dry-run first)")
		}
		ok, err := confirmKeys(len(keys), ns, o.server, sio)
		if err != nil || !ok {
			return err
		}
	}
	deleted := 0
	for _, k := range keys {
		r := keyResult{Namespace: ns, Key: k, Status: "deleted"}
		if err := cl.Delete(ctx, ns, k); client.IsNotFound(err) {
			r.Status = "not_found"
			missing = append(missing, k)
		} else if err != nil {
			return fmt.Errorf("delete %s/%s: %w (%s deleted before it; run again to go on)", ns, k, adminHint(err), plural(deleted, "entry was", "entries were"))
		} else {
			deleted++
		}
		if err := say(r); err != nil {
			return err
		}
	}
	fmt.Fprintf(sio.Stderr, "deleted %s %s\n", plural(deleted, "entry", "entries"), where(ns))
	if len(missing) > 0 {
		return fmt.Errorf("%s not stored %s (already deleted or evicted, or a wrong KEY or namespace): %s",
			plural(len(missing), "of the KEYs is", "of the KEYs are"), where(ns), strings.Join(firstFew(missing, 5), ", "))
	}
	return nil
}

// firstFew returns up to n of ss, and "…" when there are more.
func firstFew(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return append(ss[:n:n], fmt.Sprintf("… (%d more)", len(ss)-n))
}

// confirmKeys asks on the terminal before deleting n named entries.
func confirmKeys(n int, ns, server string, sio stdio) (bool, error) {
	in, isFile := sio.Stdin.(*os.File)
	if !isFile || !isTerminal(in) {
		return false, usagef("delete needs --yes when stdin is not a terminal (see what it deletes with --dry-run first)")
	}
	fmt.Fprintf(sio.Stderr, "Delete %s %s on %s? [y/N] ", plural(n, "entry", "entries"), where(ns), server)
	line, _ := bufio.NewReader(sio.Stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		fmt.Fprintln(sio.Stderr, "nothing changed")
		return false, nil
	}
	return true, nil
}
