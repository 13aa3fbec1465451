package api

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/lease"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// entriesAPI serves entries by key: GET (with ?wait= behind a compile
// lease, and Range), HEAD and PUT. A PUT that stores the entry ends its
// compile lease; a request tagged with a run is recorded in the run's
// manifest.
type entriesAPI struct {
	store    Store
	out      Outcomes
	io       *streams
	leases   *lease.Table
	runs     *manifest.Recorder
	keyer    *keying.Keyer // recalls the components of the lookup that issued a key
	maxEntry int64
	bytesIn  prometheus.Counter
	log      *slog.Logger
}

// routes declares the entry routes. HEAD comes before GET: fiber's GET also
// registers HEAD, and the first match wins.
func (g *entriesAPI) routes() []Route {
	const path = "/v1/:ns/entries/:key"
	return []Route{
		{Method: http.MethodHead, Path: path, Access: readNS, Handler: g.handleHead},
		{Method: http.MethodGet, Path: path, Access: readNS, Handler: g.handleGet},
		{Method: http.MethodPut, Path: path, Access: writeNS, Upload: true, Handler: g.handlePut},
	}
}

// handlePut serves PUT /v1/{ns}/entries/{key}: it streams the body into
// the store. 201 created, 200 identical entry exists, 409 different entry
// exists, 400 bad input or digest mismatch, 413 too large, 415 a
// Content-Encoding, 507 full or over the namespace's quota.
func (g *entriesAPI) handlePut(c *fiber.Ctx) error {
	r := reqOf(c)
	if enc := contentEncoding(c); enc != "" {
		// Stored as sent, the encoded bytes would be served to every reader
		// as the executable itself, with no Content-Encoding to undo it.
		return Errorf(http.StatusUnsupportedMediaType, "unsupported_encoding",
			"Content-Encoding %s is not supported on entries, which are stored and served byte for byte: upload the executable without a Content-Encoding.", echoCodings(enc))
	}
	opts := store.PutOptions{Size: -1, Writer: writerName(c), SHA256: r.SHA256,
		Backend: r.Backend, Name: r.Name, Run: r.Run, CompileSeconds: r.CompileSeconds}
	if cl := c.Request().Header.ContentLength(); cl >= 0 {
		opts.Size = int64(cl)
	}
	g.recallSignature(r, &opts)
	w := Write{Namespace: r.Namespace, Key: r.Key, Run: r.Run, Backend: opts.Backend, Name: opts.Name,
		CompileSeconds: opts.CompileSeconds, Components: opts.Components}
	if g.maxEntry > 0 && opts.Size > g.maxEntry {
		w.Result = WriteTooLarge
		g.out.Write(w)
		return entryTooLarge(opts.Size, g.maxEntry, nil)
	}
	body := bodyStream(c, g.maxEntry, func(n int) { g.bytesIn.Add(float64(n)) })
	res, err := g.store.Put(c.UserContext(), r.Namespace, r.Key, body, opts)
	if err != nil {
		// The body's own failure explains better than the store's wrapping.
		if berr := body.Err(); berr != nil && !errors.Is(err, store.ErrConflict) {
			err = berr
		}
		w.Result = putResult(err)
		g.out.Write(w)
		if errors.Is(err, store.ErrQueueFull) {
			c.Set(fiber.HeaderRetryAfter, "5") // the queue drains while the shared tier answers
		}
		if errors.Is(err, store.ErrReclaiming) {
			c.Set(fiber.HeaderRetryAfter, "1") // value-log GC is returning evicted bytes to the disk
		}
		if qe := (*store.QuotaError)(nil); errors.As(err, &qe) && qe.Transient() {
			c.Set(fiber.HeaderRetryAfter, "5") // uploads in flight into the namespace hold its room
		}
		if errors.Is(err, store.ErrTooLarge) && g.maxEntry > 0 {
			return entryTooLarge(-1, g.maxEntry, err)
		}
		if errors.Is(err, errIncompleteBody) {
			g.log.Warn("upload aborted; nothing stored", "namespace", r.Namespace, "key", r.Key.String(), "err", err)
		}
		return err
	}
	w.Result, w.Bytes = WriteExists, res.Meta.Size
	status := http.StatusOK
	if res.Created {
		w.Result, status = WriteCreated, http.StatusCreated
		w.Backend, w.Name, w.CompileSeconds = res.Meta.Backend, res.Meta.Name, res.Meta.CompileSeconds
	}
	g.out.Write(w)
	g.leases.Written(c.UserContext(), r.Namespace, r.Key)
	if r.Run != "" {
		g.runs.RecordWrite(r.Namespace, r.Run, r.Key, r.Name)
	}
	g.io.headers(c, res.Meta)
	return c.Status(status).JSON(wire.PutResponse{
		Namespace: r.Namespace,
		Key:       r.Key.String(),
		Size:      res.Meta.Size,
		SHA256:    hex.EncodeToString(res.Meta.SHA256[:]),
		Created:   res.Created,
	})
}

// recallSignature fills what a PUT did not declare (components, backend,
// display name) from a recent lookup or keys call that issued its key.
func (g *entriesAPI) recallSignature(r *request, opts *store.PutOptions) {
	if g.keyer == nil {
		return
	}
	res, ok := g.keyer.Recall(r.Key)
	if !ok {
		return
	}
	opts.Components = store.StorableComponents(res.Components)
	if opts.Backend == "" && wire.CheckBackend(res.Backend) == nil {
		opts.Backend = res.Backend
	}
	if opts.Name == "" && wire.CheckName(res.DisplayName) == nil {
		opts.Name = res.DisplayName
	}
}

// putResult names a failed PUT's outcome.
func putResult(err error) string {
	switch {
	case errors.Is(err, store.ErrConflict):
		return WriteConflict
	case errors.Is(err, store.ErrDigestMismatch):
		return WriteDigestMismatch
	case errors.Is(err, store.ErrTooLarge):
		return WriteTooLarge
	case errors.Is(err, store.ErrQuota):
		return WriteQuota
	case errors.Is(err, store.ErrFull):
		return WriteFull
	case errors.Is(err, store.ErrQueueFull):
		return WriteQueueFull
	case errors.Is(err, errIncompleteBody):
		return WriteIncomplete
	}
	return WriteError
}

// handleHead serves HEAD /v1/{ns}/entries/{key}: the GET headers without
// the body. It does not count as an access.
func (g *entriesAPI) handleHead(c *fiber.Ctx) error {
	r := reqOf(c)
	if r.Run != "" {
		g.runs.RecordLookup(r.Namespace, r.Run, r.Key)
	}
	m, err := g.store.Stat(c.UserContext(), r.Namespace, r.Key)
	if err != nil {
		return entryErr(err, r.Namespace, r.Key)
	}
	g.io.headers(c, m)
	c.Response().Header.SetContentType(fiber.MIMEOctetStream)
	c.Status(http.StatusOK)
	c.Response().SkipBody = true
	c.Response().Header.SetContentLength(int(m.Size))
	return nil
}

// handleGet serves GET /v1/{ns}/entries/{key}: the entry's bytes, streamed
// from the store and verified chunk by chunk. A single-range Range header
// gives 206; an unsatisfiable or multi-range one gives 416. ?wait= first
// parks behind the entry's compile lease (wait.go). A full 200 is a hit
// that saves a compile; a 206 or a 304 is a partial hit.
func (g *entriesAPI) handleGet(c *fiber.Ctx) error {
	r := reqOf(c)
	if r.Run != "" {
		g.runs.RecordLookup(r.Namespace, r.Run, r.Key)
	}
	args := c.Context().QueryArgs()
	waiting := args.Has("wait")
	var wait time.Duration
	if waiting {
		var err error
		if wait, err = parseWait(string(args.Peek("wait"))); err != nil {
			return err
		}
	}
	// waited: the client counted its miss (a plain GET) before this wait
	// and spent this long on the wait's earlier slices (its slicing or a
	// proxy cut them), time not saved either. Present, even as 0, it
	// makes a 404 count no second miss; a bare ?wait= (curl) counts its
	// no-lease miss as a lookup of its own.
	continued := args.Has("waited")
	waited, err := parseWaited(string(args.Peek("waited")), continued, waiting)
	if err != nil {
		return err
	}
	if waiting {
		start := time.Now()
		if err := g.waitForEntry(c, r, wait); err != nil {
			return err
		}
		waited += time.Since(start) // the client's wall time spent parked: not saved
	}
	ctx := c.UserContext()
	miss := Lookup{Route: RouteEntries, Namespace: r.Namespace, Key: r.Key, Run: r.Run, Anonymous: r.Anonymous, Writer: r.Writer, Backend: r.Backend}
	countMiss := func() {
		if !continued { // a continuation's miss was counted by the wait's first request
			g.out.Lookup(miss)
		}
	}
	off, n := int64(0), int64(-1)
	if rangeHdr := r.header(c, seenRange, fiber.HeaderRange); rangeHdr != "" {
		meta, err := g.store.Stat(ctx, r.Namespace, r.Key)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				countMiss()
			}
			return entryErr(err, r.Namespace, r.Key)
		}
		var ok bool
		if off, n, ok, err = parseRange(rangeHdr, meta.Size); err != nil {
			c.Set(fiber.HeaderContentRange, fmt.Sprintf("bytes */%d", meta.Size))
			return err
		}
		if !ok {
			off, n = 0, -1
		}
	}
	m, rc, err := g.store.Get(ctx, r.Namespace, r.Key, off, n)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			countMiss()
		}
		return entryErr(err, r.Namespace, r.Key)
	}
	size := m.Size - off
	if n >= 0 {
		size = n
	}
	hit := Lookup{Route: RouteEntries, Namespace: r.Namespace, Key: r.Key, Run: r.Run, Anonymous: r.Anonymous, Writer: r.Writer, Hit: true,
		Backend: m.Backend, Name: m.Name, CompileSeconds: m.CompileSeconds, Bytes: size, Partial: size < m.Size,
		Waited: waiting, WaitSeconds: waited.Seconds()}
	g.io.headers(c, m)
	if notModified(r.header(c, seenIfNoneMatch, fiber.HeaderIfNoneMatch), m) {
		_ = rc.Close()
		hit.Bytes, hit.Partial = 0, true
		g.out.Lookup(hit)
		return c.SendStatus(http.StatusNotModified)
	}
	status := http.StatusOK
	if n >= 0 {
		status = http.StatusPartialContent
		c.Set(fiber.HeaderContentRange, fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, m.Size))
	}
	c.Status(status)
	// A hit once the whole body was read: a corrupt chunk, first or
	// later, is a failure that saved nothing.
	return g.io.send(c, r.Namespace, r.Key, rc, size, g.out, hit)
}

// entryTooLarge is the 413 of an upload over --max-entry-size (limit
// bytes), of size bytes (-1: found while streaming). It names the flag, so
// that whoever reads it in a job's log knows what to ask the operator for.
func entryTooLarge(size, limit int64, err error) *Error {
	what := "The entry is"
	if size >= 0 {
		what = fmt.Sprintf("The entry is %d bytes,", size)
	}
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: "entry_too_large", Err: err, Message: fmt.Sprintf(
		"%s over this server's limit of %d bytes per entry (serve --max-entry-size): nothing was stored; its operator can raise the limit.",
		what, limit)}
}
