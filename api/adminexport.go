package api

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/stats/report"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// exportPage is how many entries an export lists at a time before reading
// their bytes: the export's memory is this many metadata records and one
// 256 KiB buffer, whatever the namespace's size.
const exportPage = 256

// quietReader is a store that reads an entry without counting an access
// (*store.Badger; *tiered.Store, which also fills no hot tier); an export
// through another store counts one per entry.
type quietReader interface {
	Read(ctx context.Context, ns string, key cachekey.Key) (store.Meta, io.ReadCloser, error)
}

// exportRecords are the PAX records of an entry's export member: the batch
// stream's records and the rest of its provenance.
func exportRecords(m store.Meta, sig string) (map[string]string, error) {
	pax := paxRecords(m, sig)
	if m.Writer != "" {
		pax[wire.PAXWriter] = m.Writer
	}
	if m.Run != "" {
		pax[wire.PAXRun] = m.Run
	}
	pax[wire.PAXCreated] = m.Created.UTC().Format(time.RFC3339Nano)
	pax[wire.PAXLastAccess] = m.LastAccess.UTC().Format(time.RFC3339Nano)
	pax[wire.PAXHits] = strconv.FormatInt(m.Hits, 10)
	for rec, v := range map[string]map[string]string{wire.PAXLabels: m.Labels, wire.PAXComponents: m.Components} {
		if len(v) == 0 {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", rec, err)
		}
		pax[rec] = string(b)
	}
	return pax, nil
}

// handleExport serves GET /v1/{ns}/export: an application/x-tar stream of
// every entry in the namespace that passes the listing's filters, in key
// order, one member per entry named by its key, with the batch stream's PAX
// records plus writer, run, created, last access, hits, labels and
// components; the last member is export.json (wire.ExportSummary). The
// length is not known in advance (chunked); a stream cut short, or without
// export.json, is broken. Reading does not count as an access.
func (g *adminEntriesAPI) handleExport(c *fiber.Ctx) error {
	ns := reqOf(c).Namespace
	f, err := parseFilter(c, time.Now())
	if err != nil {
		return err
	}
	found := false
	if err := g.store.Walk(c.UserContext(), ns, func(m store.Meta) bool { found = f.match(m); return !found }); err != nil {
		return err
	}
	if !found {
		return Errorf(http.StatusNotFound, "no_entries", "Namespace %q has no entries%s to export: check the namespace name.", ns, f.phrase())
	}
	e := &exportStream{g: g, ns: ns, f: f}
	e.ctx, e.cancel = context.WithCancel(g.baseCtx)
	g.io.inflight.Add(1) // until fasthttp closes the body; Shutdown waits for it
	c.Response().Header.SetContentType("application/x-tar")
	c.Status(http.StatusOK)
	c.Context().SetBodyStream(e, -1)
	return nil
}

// phrase says " matching the filters" when f filters anything.
func (f entryFilter) phrase() string {
	if f == (entryFilter{maxSize: -1}) {
		return ""
	}
	return " matching the filters"
}

// exportStream is an export response body. fasthttp reads it (through a
// pipe fed by WriteTo) and closes it when done.
type exportStream struct {
	g  *adminEntriesAPI
	ns string
	f  entryFilter
	pipedBody
}

// WriteTo writes the whole export to w. An error means the stream must be
// aborted (the connection closes before the last chunk).
func (e *exportStream) WriteTo(w io.Writer) (n int64, err error) {
	defer e.g.io.recovered(&err, "export")
	cw := &countingWriter{w: w}
	sum, err := e.write(cw)
	e.g.io.bytesOut.Add(float64(cw.n))
	switch {
	case err == nil:
		e.g.log.Info("namespace exported", "namespace", e.ns, "entries", sum.Entries, "bytes", sum.Bytes, "vanished", sum.Vanished)
	case cw.err != nil || e.ctx.Err() != nil:
		e.g.log.Info("export cut short by the client or shutdown", "namespace", e.ns, "entries", sum.Entries, "sent", cw.n, "err", err)
	default:
		e.g.log.Error("export aborted", "namespace", e.ns, "entries", sum.Entries, "sent", cw.n, "err", err)
	}
	return cw.n, err
}

func (e *exportStream) write(w io.Writer) (wire.ExportSummary, error) {
	sum := wire.ExportSummary{Namespace: e.ns}
	buf := make([]byte, 256<<10)
	var cur *cursor
	for {
		page := make([]store.Meta, 0, exportPage)
		full := false
		err := walkFrom(e.ctx, e.g.store, e.ns, cur, func(m store.Meta) bool {
			cur = &cursor{ns: m.Namespace, key: m.Key}
			if e.f.match(m) {
				page = append(page, m)
			}
			full = len(page) == exportPage
			return !full
		})
		if err != nil {
			return sum, err
		}
		for _, p := range page {
			n, err := e.member(w, p.Key, buf)
			if errors.Is(err, store.ErrNotFound) {
				sum.Vanished++
				continue
			}
			if err != nil {
				return sum, fmt.Errorf("export %s/%s: %w", e.ns, p.Key, err)
			}
			sum.Entries++
			sum.Bytes += n
		}
		if !full {
			break
		}
	}
	tail, err := jsonTail(wire.ExportMember, sum)
	if err != nil {
		return sum, fmt.Errorf("encode %s: %w", wire.ExportMember, err)
	}
	_, err = w.Write(tail)
	return sum, err
}

// member writes the entry key's member and returns its size.
func (e *exportStream) member(w io.Writer, key cachekey.Key, buf []byte) (int64, error) {
	var m store.Meta
	var rc io.ReadCloser
	var err error
	if q, ok := e.g.store.(quietReader); ok {
		m, rc, err = q.Read(e.ctx, e.ns, key)
	} else {
		m, rc, err = e.g.store.Get(e.ctx, e.ns, key, 0, -1)
	}
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	pax, err := exportRecords(m, e.g.io.signature(m))
	if err != nil {
		return 0, err
	}
	hdr, err := tarHeader(key, m, pax)
	if err != nil {
		return 0, fmt.Errorf("tar header: %w", err)
	}
	if _, err := w.Write(hdr); err != nil {
		return 0, err
	}
	return m.Size, copyMember(w, rc, m.Size, buf)
}

// Read reads the stream through a pipe fed by WriteTo.
func (e *exportStream) Read(p []byte) (int, error) { return e.read(e, p) }

// Close stops the stream and ends its in-flight count.
func (e *exportStream) Close() error {
	e.close(e.g.io.inflight)
	return nil
}

// maxFailureName and maxFailureMessage bound, in runes, the member name and
// the message of each failure an import answer lists.
const maxFailureName, maxFailureMessage = 200, 400

// handleImport serves POST /v1/{ns}/import: an application/x-tar body in
// the export format (GET /v1/{ns}/export), read one member at a time and
// streamed into the store, keeping each entry's writer, run, created time,
// backend, name, compile seconds, labels and components. Each entry
// commits whole or not at all, exactly as a PUT: nothing half-written is
// visible. An entry already present with identical bytes is skipped; a
// member the store refuses (different bytes under its key, a digest
// mismatch, bad metadata, an entry larger than the store or than the
// namespace's max_bytes) is counted and listed in the answer, and the
// import goes on. A body that is not a tar, or is cut short, ends the
// import with 400 (what was committed before stays); a store that cannot
// take more now (507, 503) ends it with that status. Without a writer record,
// the entry's writer is the importing token.
func (g *adminEntriesAPI) handleImport(c *fiber.Ctx) error {
	ns := reqOf(c).Namespace
	ctx := c.UserContext()
	body := bodyStream(c, 0, func(n int) { g.bytesIn.Add(float64(n)) })
	tr := tar.NewReader(body)
	res := wire.ImportResult{Namespace: ns, Failures: []wire.ImportFailure{}}
	// A member's name may be a PAX record of up to a megabyte, quoted in
	// its message: both are cut, or MaxImportFailures of them would hold
	// (and answer) gigabytes once JSON-escaped.
	fail := func(member string, e *Error) {
		res.Failed++
		if len(res.Failures) < wire.MaxImportFailures {
			res.Failures = append(res.Failures, wire.ImportFailure{Member: wire.OneLine(member, maxFailureName),
				Code: e.Code, Message: wire.OneLine(e.Message, maxFailureMessage)})
		}
	}
	// stopped logs the end of an import cut short; at names the member's
	// entry ("key", hex) when the store failed on it.
	stopped := func(err error, at ...any) error {
		attrs := append([]any{"namespace", ns}, at...)
		g.log.Warn("import stopped", append(attrs, "imported", res.Imported, "skipped", res.Skipped, "failed", res.Failed, "err", err)...)
		return err
	}
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if berr := body.Err(); berr != nil {
				return stopped(berr)
			}
			return stopped(Errorf(http.StatusBadRequest, "bad_tar",
				"The body is not a tar stream in the export format (at member %d: %s); %s imported before it.", n+1, err, report.Plural(int64(res.Imported), "entry was", "entries were")))
		}
		if h.Name == wire.ExportMember {
			res.Complete = true
			continue
		}
		key, opts, ierr := importOptions(h)
		if ierr != nil {
			fail(h.Name, ierr)
			continue
		}
		if opts.Writer == "" {
			opts.Writer = writerName(c)
		}
		if g.maxEntry > 0 && h.Size > g.maxEntry {
			fail(h.Name, entryTooLarge(h.Size, g.maxEntry, nil))
			continue
		}
		member := &memberReader{r: tr}
		r, err := g.store.Put(ctx, ns, key, member, opts)
		switch {
		case err == nil && r.Created:
			res.Imported++
			res.Bytes += r.Meta.Size
		case err == nil:
			res.Skipped++
		case body.Err() != nil:
			return stopped(body.Err())
		case member.cut || errors.Is(err, io.ErrUnexpectedEOF):
			return stopped(Errorf(http.StatusBadRequest, "bad_tar",
				"Member %s is cut short: the tar stream ends inside it; nothing of it was stored, and %s imported before it.", wire.OneLine(h.Name, maxFailureName), report.Plural(int64(res.Imported), "entry was", "entries were")))
		// A member no retry can store, one that can never fit included, is
		// listed as failed and the import goes on, so that a rerun gets past it.
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrQuarantined), errors.Is(err, store.ErrDigestMismatch),
			errors.Is(err, store.ErrSizeMismatch), errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrTooLarge),
			store.NeverFits(err):
			fail(h.Name, toError(err))
		default:
			return stopped(err, "key", key.String())
		}
	}
	g.log.Info("namespace imported", "namespace", ns, "imported", res.Imported, "skipped", res.Skipped,
		"failed", res.Failed, "bytes", res.Bytes, "complete", res.Complete)
	return c.JSON(res)
}

// memberReader reads one import member's bytes and notes whether the tar
// stream ended inside them: the store reports such a member as a size
// mismatch, which is a failed member the import goes past, when it is the
// end of the stream (a 400 that names the member).
type memberReader struct {
	r   io.Reader
	cut bool
}

func (m *memberReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		m.cut = true
	}
	return n, err
}

// importOptions validates an export member's header and returns its key
// and the options that keep its metadata. A bad record is a 400 naming it.
func importOptions(h *tar.Header) (cachekey.Key, store.PutOptions, *Error) {
	opts := store.PutOptions{Size: h.Size}
	bad := func(format string, args ...any) (cachekey.Key, store.PutOptions, *Error) {
		return cachekey.Key{}, opts, Errorf(http.StatusBadRequest, "bad_member", format, args...)
	}
	if h.Typeflag != tar.TypeReg {
		return bad("Member %q is not a regular file; an export holds only entries and %s.", h.Name, wire.ExportMember)
	}
	key, err := cachekey.ParseKey(h.Name)
	if err != nil {
		return bad("Member %q is not named by an entry key: %s.", h.Name, err)
	}
	pax := h.PAXRecords
	sum, err := wire.ParseSHA256(pax[wire.PAXSHA256])
	if err != nil {
		return bad("Member %s has no valid %s record (64 hex characters).", h.Name, wire.PAXSHA256)
	}
	opts.SHA256 = &sum
	if v := pax[wire.PAXCompileSeconds]; v != "" {
		if opts.CompileSeconds, err = wire.ParseCompileSeconds(v); err != nil {
			return bad("Member %s: %s: %s.", h.Name, wire.PAXCompileSeconds, err)
		}
	}
	checks := []struct {
		rec   string
		into  *string
		check func(string) error
	}{
		{wire.PAXBackend, &opts.Backend, wire.CheckBackend},
		{wire.PAXName, &opts.Name, wire.CheckName},
		{wire.PAXWriter, &opts.Writer, wire.CheckName},
		{wire.PAXRun, &opts.Run, manifest.ValidateRun},
	}
	for _, c := range checks {
		if v := pax[c.rec]; v != "" {
			if err := c.check(v); err != nil {
				return bad("Member %s: %s: %s.", h.Name, c.rec, err)
			}
			*c.into = v
		}
	}
	if v := pax[wire.PAXCreated]; v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil || t.After(time.Now().Add(time.Minute)) {
			return bad("Member %s: %s must be a time (RFC 3339) not in the future, got %q.", h.Name, wire.PAXCreated, v)
		}
		opts.Created = t
	}
	for _, m := range []struct {
		rec  string
		into *map[string]string
	}{{wire.PAXLabels, &opts.Labels}, {wire.PAXComponents, &opts.Components}} {
		if v := pax[m.rec]; v != "" {
			if err := json.Unmarshal([]byte(v), m.into); err != nil {
				return bad("Member %s: %s must be a JSON object of strings: %s.", h.Name, m.rec, err)
			}
		}
	}
	return key, opts, nil
}
