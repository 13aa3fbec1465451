package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/stats/report"
	"github.com/cachesvc/cachesvc/wire"
)

const adminShowSummary = `Show one entry's provenance: who wrote it (writer, run), when (created,
last access), how often it was served (hits), its size, SHA-256, backend,
name, compile seconds, labels, components and signature. With
--verify-key, check the signature against the server's public key.
Showing does not count as an access.`

// runAdminShow is `cachesvc admin show KEY`.
func runAdminShow(ctx context.Context, args []string, sio stdio) (err error) {
	fs := newFlagSet("admin show KEY", adminShowSummary, sio)
	var af adminFlags
	af.register(fs, false)
	var verifyKey verifyKeyFlag
	fs.Var(&verifyKey, "verify-key", "the server's public key `file` (FILE.pub of 'cachesvc signkey new'), or the key itself in base64, to verify the signature with; repeat it or separate keys by commas to trust several")
	asJSON := fs.Bool("json", false, "print the entry as JSON")
	pos, err := parseInterspersed(fs, args, sio)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give exactly one KEY (64 hex characters), got %d arguments", len(pos))
	}
	key, err := cachekey.ParseKey(pos[0])
	if err != nil {
		return usagef("KEY: %s", err)
	}
	keys, err := verifyKey.load() // verifykeys.go
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
	e, err := cl.EntryMeta(ctx, ns, key.String())
	reports, rerr := cl.Reports(ctx, ns, key.String())
	if err != nil {
		if client.IsNotFound(err) && rerr == nil && reports.Quarantined {
			return showQuarantined(sio, reports, *asJSON)
		}
		return fmt.Errorf("show %s/%s: %w", ns, key, adminHint(err))
	}
	var ce *client.Error
	if rerr != nil && !(errors.As(rerr, &ce) && (ce.Status == http.StatusNotImplemented || ce.Status == http.StatusNotFound)) {
		return fmt.Errorf("show the reports of %s/%s: %w", ns, key, rerr)
	}
	sig, sigErr := signatureStatus(e, key, keys)
	if *asJSON {
		out := struct {
			client.EntryInfo
			Reports *client.ReportState `json:"report_state,omitempty"`
		}{EntryInfo: e}
		if rerr == nil {
			out.Reports = &reports
		}
		if err := writeJSON(sio, out); err != nil {
			return err
		}
		return sigErr
	}
	w := sio.Stdout
	row := func(k, v string) { fmt.Fprintf(w, "%-16s %s\n", k+":", v) }
	row("key", e.Key)
	row("namespace", e.Namespace)
	row("size", fmt.Sprintf("%s (%d bytes)", report.Bytes(e.Size), e.Size))
	row("sha256", e.SHA256)
	row("backend", dash(e.Backend))
	row("name", dash(e.Name))
	row("writer", dash(e.Writer))
	row("run", dash(e.Run))
	row("created", e.Created.UTC().Format(time.RFC3339))
	row("last access", e.LastAccess.UTC().Format(time.RFC3339))
	row("hits", fmt.Sprint(e.Hits))
	row("compile seconds", fmt.Sprint(e.CompileSeconds))
	row("labels", pairs(e.Labels))
	row("components", pairs(e.Components))
	row("signature", sig)
	if rerr == nil {
		row("reports", fmt.Sprintf("%d from %d reporters (quarantine after %d)", reports.Reports, reports.Distinct, reports.Threshold))
		printReports(w, reports.Recent)
	}
	return sigErr
}

// printReports lists reports, one per line.
func printReports(w io.Writer, rs []client.Report) {
	for _, r := range rs {
		fmt.Fprintf(w, "  %s  %s: %s\n", r.Time.UTC().Format(time.RFC3339), wire.OneLine(r.Reporter, 200), wire.OneLine(r.Reason, 200))
	}
}

// showQuarantined shows an entry that is not served because it is
// quarantined.
func showQuarantined(sio stdio, st client.ReportState, asJSON bool) error {
	if asJSON {
		return writeJSON(sio, st)
	}
	w := sio.Stdout
	row := func(k, v string) { fmt.Fprintf(w, "%-16s %s\n", k+":", v) }
	row("key", st.Key)
	row("namespace", st.Namespace)
	at := "-"
	if st.QuarantinedAt != nil {
		at = st.QuarantinedAt.UTC().Format(time.RFC3339)
	}
	row("quarantined", fmt.Sprintf("since %s (cause %s): %s", at, st.Cause, dash(st.Reason)))
	restore := "no: its bytes are gone; the next upload of the key replaces it"
	if st.Restorable {
		restore = fmt.Sprintf("yes: cachesvc admin restore %s --namespace %s", st.Key, st.Namespace)
	}
	row("restorable", restore)
	row("reports", fmt.Sprintf("%d from %d reporters (quarantine after %d)", st.Reports, st.Distinct, st.Threshold))
	printReports(w, st.Recent)
	return nil
}

// signatureStatus describes e's signature, verified against keys when
// given (naming the key it verifies under); a bad signature is also an
// error.
func signatureStatus(e client.EntryInfo, key cachekey.Key, keys verifyKeys) (string, error) {
	switch {
	case e.Signature == "":
		return "none (the server has no signing key)", nil
	case keys == nil:
		return "present, not verified (give --verify-key FILE.pub)", nil
	}
	sum, err := wire.ParseSHA256(e.SHA256)
	if err != nil {
		return "", fmt.Errorf("the server sent a bad sha256: %w", err)
	}
	label, ok := keys.verify(key, sum, e.Signature)
	if !ok {
		return "INVALID for " + keys.String(), fmt.Errorf("the signature of %s/%s does not verify with %s: the entry was not signed by that key's server", e.Namespace, e.Key, keys)
	}
	return "valid (verified with " + label + ")", nil
}

// pairs renders a map as "k=v, ..." in key order, or "-".
func pairs(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		// A writer's signature chose the components: keep its escapes
		// off the terminal.
		out[i] = wire.OneLine(k, 200) + "=" + wire.OneLine(m[k], 200)
	}
	return strings.Join(out, ", ")
}
