package api

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

// Request and response headers of the entries API.
const (
	HeaderContentSHA256  = "X-Content-SHA256"
	HeaderCompileSeconds = "X-Compile-Seconds"
	HeaderBackend        = "X-Cachesvc-Backend"
	HeaderName           = "X-Cachesvc-Name"
	HeaderRun            = "X-Cachesvc-Run"
)

// maxHeaderValue bounds the free-text headers stored with an entry.
const maxHeaderValue = 256

// PutResponse is the JSON body of a successful PUT of an entry.
type PutResponse struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	// Created is true when this request stored the entry, false when an
	// identical entry already existed.
	Created bool `json:"created"`
}

// entryParams validates the :ns and :key route parameters.
func entryParams(c *fiber.Ctx) (string, cachekey.Key, error) {
	ns := strings.Clone(c.Params("ns"))
	if err := cachekey.ValidateNamespace(ns); err != nil {
		return "", cachekey.Key{}, &Error{Status: http.StatusBadRequest, Code: "bad_namespace", Message: sentence(err.Error()), Err: err}
	}
	key, err := cachekey.ParseKey(c.Params("key"))
	if err != nil {
		return "", cachekey.Key{}, &Error{Status: http.StatusBadRequest, Code: "bad_key", Message: sentence(err.Error()), Err: err}
	}
	return ns, key, nil
}

// putOptions reads and validates the PUT headers.
func putOptions(c *fiber.Ctx) (store.PutOptions, error) {
	opts := store.PutOptions{Size: -1, Writer: writerName(c)} // auth.go
	if v := c.Get(HeaderContentSHA256); v != "" {
		var d [32]byte
		if len(v) != 64 {
			return opts, Errorf(http.StatusBadRequest, "bad_header", "%s must be 64 hex characters (the SHA-256 of the body), got %d characters.", HeaderContentSHA256, len(v))
		}
		if _, err := hex.Decode(d[:], []byte(v)); err != nil {
			return opts, Errorf(http.StatusBadRequest, "bad_header", "%s must be 64 hex characters (the SHA-256 of the body): %s.", HeaderContentSHA256, err)
		}
		opts.SHA256 = &d
	}
	if v := c.Get(HeaderCompileSeconds); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return opts, Errorf(http.StatusBadRequest, "bad_header", "%s must be a non-negative number of seconds, got %q.", HeaderCompileSeconds, v)
		}
		opts.CompileSeconds = f
	}
	for _, h := range []struct {
		name string
		dst  *string
	}{{HeaderBackend, &opts.Backend}, {HeaderName, &opts.Name}, {HeaderRun, &opts.Run}} {
		v := c.Get(h.name)
		if len(v) > maxHeaderValue {
			return opts, Errorf(http.StatusBadRequest, "bad_header", "%s is %d bytes; the limit is %d.", h.name, len(v), maxHeaderValue)
		}
		for _, r := range v {
			if r < 0x20 || r == 0x7f {
				return opts, Errorf(http.StatusBadRequest, "bad_header", "%s contains a control character.", h.name)
			}
		}
		*h.dst = strings.Clone(v)
	}
	if cl := c.Request().Header.ContentLength(); cl >= 0 {
		opts.Size = int64(cl)
	}
	return opts, nil
}

// handlePutEntry serves PUT /v1/{ns}/entries/{key}: it streams the body into
// the store. 201 created, 200 identical entry exists, 409 different entry
// exists, 400 bad input or digest mismatch, 413 too large, 507 full.
func (s *Server) handlePutEntry(c *fiber.Ctx) error {
	ns, key, err := entryParams(c)
	if err != nil {
		return err
	}
	opts, err := putOptions(c)
	if err != nil {
		return err
	}
	s.recallSignature(key, &opts) // components from the lookup that issued key (keys.go)
	if max := s.cfg.MaxEntryBytes; max > 0 && opts.Size > max {
		s.metrics.puts.WithLabelValues("too_large").Inc()
		s.totals.putsRejected.Add(1)
		return Errorf(http.StatusRequestEntityTooLarge, "entry_too_large",
			"The entry is %d bytes; the maximum entry size is %d bytes.", opts.Size, max)
	}
	body := bodyStream(c, s.cfg.MaxEntryBytes, func(n int) {
		s.metrics.bytesIn.Add(float64(n))
		s.totals.bytesIn.Add(int64(n))
	})
	res, err := s.cfg.Store.Put(c.UserContext(), ns, key, body, opts)
	if err != nil {
		// The body's own failure explains better than the store's wrapping.
		if berr := body.Err(); berr != nil && !errors.Is(err, store.ErrConflict) {
			err = berr
		}
		s.metrics.puts.WithLabelValues(putResult(err)).Inc()
		s.totals.putsRejected.Add(1)
		if errors.Is(err, errIncompleteBody) {
			s.log.Warn("upload aborted; nothing stored", "namespace", ns, "key", key.String(), "err", err)
		}
		return err
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
		s.recordEntryWrite(c, ns, key, res.Meta)
		s.metrics.puts.WithLabelValues("created").Inc()
		s.totals.putsCreated.Add(1)
	} else {
		s.metrics.puts.WithLabelValues("exists").Inc()
		s.totals.putsExisting.Add(1)
	}
	setEntryHeaders(c, res.Meta)
	s.setProvenance(c, res.Meta) // provenance.go
	return c.Status(status).JSON(PutResponse{
		Namespace: ns,
		Key:       key.String(),
		Size:      res.Meta.Size,
		SHA256:    hex.EncodeToString(res.Meta.SHA256[:]),
		Created:   res.Created,
	})
}

// entryErr gives a miss on (ns, key) a precise message; other store errors
// already name the entry.
func entryErr(err error, ns string, key cachekey.Key) error {
	if errors.Is(err, store.ErrNotFound) {
		return &Error{Status: http.StatusNotFound, Code: "not_found",
			Message: fmt.Sprintf("No entry with key %s in namespace %q.", key, ns), Err: err}
	}
	return err
}

// putResult names a failed PUT's outcome for cachesvc_puts_total.
func putResult(err error) string {
	switch {
	case errors.Is(err, store.ErrConflict):
		return "conflict"
	case errors.Is(err, store.ErrDigestMismatch):
		return "digest_mismatch"
	case errors.Is(err, store.ErrTooLarge):
		return "too_large"
	case errors.Is(err, store.ErrFull):
		return "full"
	case errors.Is(err, errIncompleteBody):
		return "incomplete"
	}
	return "error"
}

// setEntryHeaders sets the metadata headers of GET, HEAD and PUT responses.
func setEntryHeaders(c *fiber.Ctx, m store.Meta) {
	sum := hex.EncodeToString(m.SHA256[:])
	h := &c.Response().Header
	h.Set(fiber.HeaderETag, `"`+sum+`"`)
	h.Set(HeaderContentSHA256, sum)
	h.Set(HeaderCompileSeconds, strconv.FormatFloat(m.CompileSeconds, 'f', -1, 64))
	if m.Backend != "" {
		h.Set(HeaderBackend, m.Backend)
	}
	if m.Name != "" {
		h.Set(HeaderName, m.Name)
	}
	h.Set(fiber.HeaderAcceptRanges, "bytes")
}

// notModified reports whether the request's If-None-Match matches m.
func notModified(c *fiber.Ctx, m store.Meta) bool {
	inm := c.Get(fiber.HeaderIfNoneMatch)
	if inm == "" {
		return false
	}
	etag := `"` + hex.EncodeToString(m.SHA256[:]) + `"`
	for _, t := range strings.Split(inm, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// handleHeadEntry serves HEAD /v1/{ns}/entries/{key}: the GET headers without
// the body. It does not count as an access.
func (s *Server) handleHeadEntry(c *fiber.Ctx) error {
	ns, key, err := entryParams(c)
	if err != nil {
		return err
	}
	m, err := s.cfg.Store.Stat(c.UserContext(), ns, key)
	if err != nil {
		return entryErr(err, ns, key)
	}
	setEntryHeaders(c, m)
	s.setProvenance(c, m) // provenance.go
	c.Response().Header.SetContentType(fiber.MIMEOctetStream)
	c.Status(http.StatusOK)
	c.Response().SkipBody = true
	c.Response().Header.SetContentLength(int(m.Size))
	return nil
}

// handleGetEntry serves GET /v1/{ns}/entries/{key}: the entry's bytes,
// streamed from the store and verified chunk by chunk. A single-range Range
// header gives 206; an unsatisfiable or multi-range one gives 416.
func (s *Server) handleGetEntry(c *fiber.Ctx) error {
	ns, key, err := entryParams(c)
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	off, n := int64(0), int64(-1)
	rangeHdr := c.Get(fiber.HeaderRange)
	var meta store.Meta
	if rangeHdr != "" {
		if meta, err = s.cfg.Store.Stat(ctx, ns, key); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				s.recordEntryLookup(c, ns, key, nil, 0)
			}
			return entryErr(err, ns, key)
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
	m, rc, err := s.cfg.Store.Get(ctx, ns, key, off, n)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			s.recordEntryLookup(c, ns, key, nil, 0)
		}
		return entryErr(err, ns, key)
	}
	s.recordEntryLookup(c, ns, key, &m, servedBytes(m.Size, off, n))
	setEntryHeaders(c, m)
	s.setProvenance(c, m) // provenance.go
	if notModified(c, m) {
		_ = rc.Close()
		return c.SendStatus(http.StatusNotModified)
	}
	size := m.Size
	status := http.StatusOK
	if n >= 0 {
		size = n
		status = http.StatusPartialContent
		c.Set(fiber.HeaderContentRange, fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, m.Size))
	} else if off > 0 {
		size = m.Size - off
	}
	c.Status(status)
	return s.sendEntryBody(c, ns, key, rc, size)
}

// smallBodyBytes is the largest entry body sent from memory: read whole from
// the store (one short read transaction, fully verified before the status is
// sent) into fasthttp's pooled response buffer and written with the headers.
// Larger bodies stream.
const smallBodyBytes = 64 << 10

// bufReaders holds the 32 KiB readers that streamed bodies peek through.
var bufReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// sendEntryBody sends size bytes of rc (an entry's bytes from the store) as
// the response body and takes ownership of rc. The response status and
// headers other than the content type are set by the caller.
func (s *Server) sendEntryBody(c *fiber.Ctx, ns string, key cachekey.Key, rc io.ReadCloser, size int64) error {
	c.Response().Header.SetContentType(fiber.MIMEOctetStream)
	if size <= smallBodyBytes {
		// A bad chunk fails with a clean JSON error before anything is sent.
		n, err := copyEntry(c.Response().BodyWriter(), rc)
		_ = rc.Close()
		if err == nil && n != size {
			err = fmt.Errorf("entry is %d bytes, read %d", size, n)
		}
		if err != nil {
			c.Response().ResetBody()
			return fmt.Errorf("read %s/%s: %w", ns, key, err)
		}
		s.metrics.bytesOut.Add(float64(n))
		s.totals.bytesOut.Add(n)
		return nil
	}
	// Read the first chunk before answering, so that an entry whose first
	// chunk is corrupt fails with a clean JSON error. A later bad chunk
	// aborts the connection mid-body: the client never gets a complete
	// wrong body.
	br := bufReaders.Get().(*bufio.Reader)
	br.Reset(rc)
	if _, err := br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
		br.Reset(nil)
		bufReaders.Put(br)
		_ = rc.Close()
		return fmt.Errorf("read %s/%s: %w", ns, key, err)
	}
	s.inflight.Add(1) // until fasthttp closes the body: the store stays open
	c.Context().SetBodyStream(&responseBody{r: br, c: rc, s: s}, int(size))
	return nil
}

// copyEntry copies r to w, through r's WriteTo when it has one (the store's
// reader writes its verified chunks directly).
func copyEntry(w io.Writer, r io.Reader) (int64, error) {
	if wt, ok := r.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return io.Copy(w, r)
}

// responseBody streams an entry to the client, counts the bytes, and closes
// the store reader when fasthttp is done with it (fasthttp calls Close).
type responseBody struct {
	r    *bufio.Reader
	c    io.Closer
	s    *Server
	once sync.Once
}

// Read reads from the entry.
func (b *responseBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.count(n)
	}
	return n, err
}

// WriteTo writes the rest of the entry to w in the store's chunk-sized
// writes (fasthttp's copy prefers it to Read, which would go through its 4
// KiB copy buffer: one write system call per 4 KiB).
func (b *responseBody) WriteTo(w io.Writer) (int64, error) {
	n, err := b.r.WriteTo(w)
	if n > 0 {
		b.count(int(n))
	}
	return n, err
}

func (b *responseBody) count(n int) {
	b.s.metrics.bytesOut.Add(float64(n))
	b.s.totals.bytesOut.Add(int64(n))
}

// Close closes the store reader.
func (b *responseBody) Close() error {
	err := b.c.Close()
	b.once.Do(func() {
		b.r.Reset(nil)
		bufReaders.Put(b.r)
		b.s.inflight.Add(-1)
	})
	return err
}

// parseRange parses a single-range "bytes=" Range header against size. It
// returns ok=false when the header should be ignored (not a bytes range), and
// a 416 *Error when the range is malformed, multiple or unsatisfiable.
func parseRange(h string, size int64) (off, n int64, ok bool, err error) {
	bad := func(format string, args ...any) (int64, int64, bool, error) {
		return 0, 0, false, Errorf(http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable", format, args...)
	}
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !found {
		return 0, -1, false, nil
	}
	if strings.Contains(spec, ",") {
		return bad("Only a single byte range is supported, got %q.", h)
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return bad("Range %q is malformed: use bytes=START-END, bytes=START- or bytes=-SUFFIX.", h)
	}
	switch {
	case first == "": // suffix: last N bytes
		k, perr := strconv.ParseInt(last, 10, 64)
		if perr != nil || k <= 0 {
			return bad("Range %q is malformed: the suffix length must be a positive integer.", h)
		}
		if size == 0 {
			return bad("Range %q cannot be satisfied: the entry is empty.", h)
		}
		k = min(k, size)
		return size - k, k, true, nil
	default:
		start, perr := strconv.ParseInt(first, 10, 64)
		if perr != nil || start < 0 {
			return bad("Range %q is malformed: the start must be a non-negative integer.", h)
		}
		if start >= size {
			return bad("Range %q starts at or after the end of the %d-byte entry.", h, size)
		}
		end := size - 1
		if last != "" {
			e, perr := strconv.ParseInt(last, 10, 64)
			if perr != nil || e < start {
				return bad("Range %q is malformed: the end must be an integer not below the start.", h)
			}
			end = min(e, size-1)
		}
		return start, end - start + 1, true, nil
	}
}

// handleDeleteEntry serves DELETE /v1/{ns}/entries/{key}: 204, or 404 on a
// miss. (Admin-only once auth lands.)
func (s *Server) handleDeleteEntry(c *fiber.Ctx) error {
	ns, key, err := entryParams(c)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.Delete(c.UserContext(), ns, key); err != nil {
		return entryErr(err, ns, key)
	}
	s.log.Info("entry deleted", "namespace", ns, "key", key.String())
	return c.SendStatus(http.StatusNoContent)
}
