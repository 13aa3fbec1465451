package main

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/stats/report"
	"github.com/cachesvc/cachesvc/wire"
)

const adminExportSummary = `Write the entries of a namespace that pass every filter to a tar, streamed:
one member per entry named by its key, with PAX records keeping its SHA-256,
writer, run, created and last-access times, hits, backend, name, compile
seconds, labels, components and, when the server signs entries, its
signature; the last member is export.json. Every member's SHA-256 is checked
as it arrives. A file is written under a temporary name and renamed when
complete, so a broken export never leaves a file that looks whole; --out -
writes to stdout. 'cachesvc admin import' loads it into another server.`

// runAdminExport is `cachesvc admin export`.
func runAdminExport(ctx context.Context, args []string, sio stdio) (err error) {
	fs := newFlagSet("admin export", adminExportSummary, sio)
	var af adminFlags
	var ff filterFlags
	af.register(fs, false)
	ff.register(fs)
	var out string
	fs.StringVar(&out, "out", "", "tar `file` to write, or - for stdout (required)")
	// -o is an alias, so help shows it on --out's line as "-o"; marking
	// --out command line only covers it (an alias's variable is read only
	// through its target's).
	aliasFlag(fs, "o", "out")
	commandLineOnly(fs, "out")
	// Interspersed, so that "export team.tar --namespace team" names
	// team.tar alone, not every flag after it (a --token's secret included).
	pos, err := parseInterspersed(fs, args, sio)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected arguments: %s (the file goes in --out, e.g. --out %s)", strings.Join(pos, " "), pos[0])
	}
	if out == "" {
		return usagef("--out is required: a tar file to write, or - for stdout")
	}
	if out == "-" && isTerminal(sio.Stdout) {
		// A tar of every entry is binary and may be gigabytes: never to a
		// terminal (as gzip refuses), only to a redirect or a pipe.
		return usagef("--out - writes the tar to stdout, which is a terminal: redirect it (> export.tar), pipe it, or give --out FILE")
	}
	if fi, err := os.Stat(out); err == nil && fi.IsDir() && out != "-" {
		// Checked before the download, which would otherwise end in a
		// rename that cannot replace a directory.
		return usagef("--out %s is a directory: name a file, e.g. --out %s", out, filepath.Join(out, "export.tar"))
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
	body, err := cl.Export(ctx, ns, f)
	if err != nil {
		return fmt.Errorf("export namespace %q: %w", ns, adminHint(err))
	}
	defer body.Close()
	if out == "-" {
		sum, err := copyExport(sio.Stdout, body, newBytesBar(sio, -1, "exporting "+ns))
		if err != nil {
			return fmt.Errorf("export namespace %q to stdout broke after %s (what was written is incomplete): %w", ns, plural(sum.Entries, "entry", "entries"), err)
		}
		reportExport(sio, sum, "stdout")
		return nil
	}
	return exportToFile(sio, ns, body, out)
}

// exportToFile writes the export stream to a temporary file beside path
// and renames it to path once the stream is verified complete.
func exportToFile(sio stdio, ns string, body io.Reader, path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-*")
	if err != nil {
		return fmt.Errorf("create the export file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 256<<10)
	sum, err := copyExport(bw, body, newBytesBar(sio, -1, "exporting "+ns))
	if err != nil {
		return fmt.Errorf("export namespace %q broke after %s, so %s was not written; run it again: %w", ns, plural(sum.Entries, "entry", "entries"), path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename the export file to %s: %w", path, err)
	}
	reportExport(sio, sum, path)
	return nil
}

// reportExport prints an export's summary.
func reportExport(sio stdio, sum wire.ExportSummary, dest string) {
	fmt.Fprintf(sio.Stderr, "exported %s (%s) from namespace %q to %s", plural(sum.Entries, "entry", "entries"), report.Bytes(sum.Bytes), sum.Namespace, dest)
	if sum.Vanished > 0 {
		fmt.Fprintf(sio.Stderr, "; %s deleted or evicted during the export", plural(sum.Vanished, "was", "were"))
	}
	fmt.Fprintln(sio.Stderr)
}

// copyExport copies an export stream to w byte for byte while reading it
// as a tar: every entry member's bytes must match its SHA-256 record, and
// the stream must end with export.json, whose counts must match.
func copyExport(w io.Writer, body io.Reader, b *bar) (wire.ExportSummary, error) {
	var sum wire.ExportSummary
	tee := io.TeeReader(body, io.MultiWriter(w, b.writer()))
	defer b.finish()
	tr := tar.NewReader(tee)
	entries, seen := 0, false
	var bytes int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sum, fmt.Errorf("read the tar stream: %w", err)
		}
		if seen {
			return sum, fmt.Errorf("member %q after %s", h.Name, wire.ExportMember)
		}
		if h.Name == wire.ExportMember {
			if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&sum); err != nil {
				return sum, fmt.Errorf("decode %s: %w", wire.ExportMember, err)
			}
			seen = true
			continue
		}
		hsh := sha256.New()
		n, err := io.Copy(hsh, tr)
		if err != nil {
			return wire.ExportSummary{Entries: entries}, fmt.Errorf("read member %s: %w", h.Name, err)
		}
		if got := hex.EncodeToString(hsh.Sum(nil)); got != h.PAXRecords[wire.PAXSHA256] {
			return wire.ExportSummary{Entries: entries}, fmt.Errorf("member %s has sha256 %s, its record says %q", h.Name, got, h.PAXRecords[wire.PAXSHA256])
		}
		entries++
		bytes += n
	}
	if _, err := io.Copy(io.Discard, tee); err != nil { // the end-of-archive padding
		return sum, fmt.Errorf("read the tar stream's end: %w", err)
	}
	switch {
	case !seen:
		return wire.ExportSummary{Entries: entries}, fmt.Errorf("the stream ended without %s: the server stopped mid-export", wire.ExportMember)
	case sum.Entries != entries || sum.Bytes != bytes:
		return sum, fmt.Errorf("%s counts %d entries (%d bytes), the stream held %d (%d bytes)", wire.ExportMember, sum.Entries, sum.Bytes, entries, bytes)
	}
	return sum, nil
}

const adminImportSummary = `Load an export tar ('cachesvc admin export') into a namespace, streamed:
each entry keeps its writer, run, created time, backend, name, compile
seconds, labels and components, and commits whole or not at all. Entries
already present with the same bytes are skipped without sending them, so
an interrupted import is finished by running it again. With --verify-key,
only entries whose signature verifies with the exporting server's public
key are imported. FILE - reads the tar from stdin; --namespace is required.`

// runAdminImport is `cachesvc admin import FILE`.
func runAdminImport(ctx context.Context, args []string, sio stdio) (err error) {
	fs := newFlagSet("admin import FILE|-", adminImportSummary, sio)
	var af adminFlags
	af.register(fs, false)
	var verifyKey verifyKeyFlag
	fs.Var(&verifyKey, "verify-key", "the exporting server's public key `file` (or the key itself in base64): import only entries whose signature verifies with it; repeat it or separate keys by commas to trust several")
	pos, err := parseInterspersed(fs, args, sio)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("give exactly one FILE (an export tar, or - for stdin), got %d arguments", len(pos))
	}
	if !isSet(fs, "namespace", "ns") {
		return usagef("--namespace is required: the namespace to import into")
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
	name, in, size, err := openImport(pos[0], sio)
	if err != nil {
		return err
	}
	defer in.Close()
	ctx, cancel := af.withTimeout(ctx)
	defer cancel()
	b := newBytesBar(sio, size, "importing "+name)
	tr := tar.NewReader(bufio.NewReaderSize(io.TeeReader(in, b.writer()), 256<<10))
	first, err := tr.Next()
	if err != nil {
		b.finish()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s is empty: give a file written by 'cachesvc admin export'", name)
		}
		return fmt.Errorf("%s is not a tar written by 'cachesvc admin export': %w", name, err)
	}
	s := &importSender{cl: cl, ns: ns, keys: keys, tr: tr}
	res, err := s.run(ctx, first)
	b.finish()
	if err != nil {
		return err
	}
	return reportImport(sio, name, s, res)
}

// openImport opens the import's source: a file (with its size, for the
// progress bar) or stdin for "-".
func openImport(arg string, sio stdio) (name string, r io.ReadCloser, size int64, err error) {
	if arg == "-" {
		return "stdin", io.NopCloser(sio.Stdin), -1, nil
	}
	f, err := os.Open(arg)
	if err != nil {
		return "", nil, 0, fmt.Errorf("open the export file: %w", err)
	}
	size = -1
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	return arg, f, size, nil
}

// importSender reads a local export tar and sends the members the server
// lacks to POST /v1/{ns}/import through a pipe, one at a time: an entry
// already present (HEAD) is skipped without sending its bytes.
type importSender struct {
	cl   *client.Client
	ns   string
	keys verifyKeys // --verify-key's; nil: nothing is checked
	tr   *tar.Reader

	read     int // members read from the file
	skipped  int
	failures []wire.ImportFailure
	complete bool
}

// run sends the tar whose first member is first and returns the server's
// answer. A file cut short aborts the request, so the member being sent
// is not stored.
func (s *importSender) run(ctx context.Context, first *tar.Header) (wire.ImportResult, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := s.send(ctx, first, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	res, err := s.cl.Import(ctx, s.ns, pr)
	_ = pr.CloseWithError(errors.New("the import request ended"))
	serr := <-done
	var cut *cutShortError
	switch {
	case errors.As(serr, &cut):
		return res, fmt.Errorf("%w: the entries before it were imported; run the import again with a complete file to finish (entries already present are skipped)", serr)
	case err != nil:
		return res, fmt.Errorf("import into namespace %q: %w (the file had been read up to member %d, ahead of what the server stored; run the import again to finish: entries already present are skipped)", s.ns, adminHint(err), s.read)
	case serr != nil:
		return res, fmt.Errorf("import into namespace %q: %w", s.ns, serr)
	}
	return res, nil
}

// cutShortError means the local file ends inside a member or header.
type cutShortError struct {
	at  string
	n   int
	err error
}

func (e *cutShortError) Error() string {
	return fmt.Sprintf("the file is cut short %s (member %d): %v", e.at, e.n, e.err)
}

// send writes the members to w as a tar stream.
func (s *importSender) send(ctx context.Context, h *tar.Header, w io.Writer) error {
	tw := tar.NewWriter(w)
	for h != nil {
		s.read++
		if h.Name == wire.ExportMember {
			s.complete = true
		}
		fwd, err := s.want(ctx, h)
		if err != nil {
			return err
		}
		if fwd {
			hdr := *h
			hdr.Format = tar.FormatPAX
			if err := tw.WriteHeader(&hdr); err != nil {
				return fmt.Errorf("send member %s: %w", h.Name, err)
			}
			if _, err := io.Copy(tw, s.tr); err != nil {
				if errors.Is(err, io.ErrUnexpectedEOF) {
					return &cutShortError{at: "inside member " + h.Name, n: s.read, err: err}
				}
				return fmt.Errorf("send member %s: %w", h.Name, err)
			}
		}
		next, err := s.tr.Next()
		switch {
		case errors.Is(err, io.EOF):
			h = nil
		case err != nil:
			return &cutShortError{at: "after member " + h.Name, n: s.read + 1, err: err}
		default:
			h = next
		}
	}
	return tw.Close()
}

// want decides whether member h goes to the server: not when its entry is
// present (skipped, or a conflict when the bytes differ) or its signature
// does not verify with any --verify-key.
func (s *importSender) want(ctx context.Context, h *tar.Header) (bool, error) {
	key, err := cachekey.ParseKey(h.Name)
	if err != nil || h.Typeflag != tar.TypeReg {
		return true, nil // the server names what is wrong with it
	}
	sum := h.PAXRecords[wire.PAXSHA256]
	if s.keys != nil {
		sig := h.PAXRecords[wire.PAXSignature]
		d, err := wire.ParseSHA256(sum)
		if _, ok := s.keys.verify(key, d, sig); err != nil || !ok {
			msg := "the member's signature does not verify with " + s.keys.String() + " (--verify-key)"
			if sig == "" {
				msg = "the member is unsigned (the exporting server had no signing key)"
			}
			s.failures = append(s.failures, wire.ImportFailure{Member: h.Name, Code: "bad_signature", Message: msg})
			return false, nil
		}
	}
	have, err := s.cl.Head(ctx, s.ns, key.String())
	switch {
	case client.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("check whether %s/%s is present: %w", s.ns, key, adminHint(err))
	case have == sum:
		s.skipped++
		return false, nil
	}
	s.failures = append(s.failures, wire.ImportFailure{Member: h.Name, Code: "conflict",
		Message: fmt.Sprintf("the server holds other bytes under this key (sha256 %s, the file's %s); it was left alone", have, sum)})
	return false, nil
}

// reportImport prints what the import did; failures make it an error.
func reportImport(sio stdio, name string, s *importSender, res wire.ImportResult) error {
	failures := append(s.failures, res.Failures...)
	failed := len(s.failures) + res.Failed
	fmt.Fprintf(sio.Stdout, "imported %s (%s) into namespace %q; skipped %d already present; %d failed\n",
		plural(res.Imported, "entry", "entries"), report.Bytes(res.Bytes), s.ns, s.skipped+res.Skipped, failed)
	for _, f := range failures {
		fmt.Fprintf(sio.Stdout, "  %s: %s: %s\n", f.Member, f.Code, f.Message)
	}
	if n := failed - len(failures); n > 0 {
		fmt.Fprintf(sio.Stdout, "  ... and %d more\n", n)
	}
	switch {
	case failed > 0:
		were := "were"
		if failed == 1 {
			were = "was"
		}
		return fmt.Errorf("%s of %s %s not imported (listed above)", plural(failed, "entry", "entries"), name, were)
	case !s.complete:
		return fmt.Errorf("%s has no %s: it is not a complete export (the entries it holds were imported)", name, wire.ExportMember)
	}
	return nil
}
