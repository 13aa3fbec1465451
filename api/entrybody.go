package api

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// streams sends entries: their headers (metadata, provenance, signature)
// and their bodies, counting the bytes sent and keeping a streamed body in
// flight until fasthttp has written it, so that Shutdown waits for it.
type streams struct {
	inflight *atomic.Int64
	bytesOut prometheus.Counter
	signer   *auth.Signer
	panics   prometheus.Counter // cachesvc_http_handler_panics_total
	log      *slog.Logger
}

// recovered is deferred by every response body that fasthttp streams after
// its handler returned, where the recover middleware no longer reaches: a
// panic there (a bug) becomes *err, which aborts that response's
// connection, and is logged with its stack and counted as a handler's is,
// instead of ending the process.
func (st *streams) recovered(err *error, body string) {
	if v := recover(); v != nil {
		st.panics.Inc()
		st.log.Error("response body panicked; its connection is aborted", "body", body, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		*err = fmt.Errorf("%s: panic: %v", body, v)
	}
}

// headers sets the entry headers of GET, HEAD, PUT and lookup responses:
// metadata, provenance (writer, created, run) and, with a signing key, the
// signature.
func (st *streams) headers(c *fiber.Ctx, m store.Meta) {
	setEntryHeaders(c, m)
	h := &c.Response().Header
	if m.Writer != "" {
		h.Set(wire.HeaderWriter, m.Writer)
	}
	if !m.Created.IsZero() {
		var buf [40]byte // fits RFC 3339 with nanoseconds; no allocation
		h.SetBytesV(wire.HeaderCreated, m.Created.UTC().AppendFormat(buf[:0], time.RFC3339Nano))
	}
	if m.Run != "" {
		h.Set(wire.HeaderRun, m.Run)
	}
	if sig := st.signature(m); sig != "" {
		h.Set(wire.HeaderSignature, sig)
	}
}

// signature returns m's signature (base64 Ed25519 of key ‖ sha256), or ""
// when the server has no signing key.
func (st *streams) signature(m store.Meta) string {
	if st.signer == nil {
		return ""
	}
	return st.signer.Sign(m.Key, m.SHA256)
}

// setEntryHeaders sets the metadata headers of GET, HEAD and PUT responses.
func setEntryHeaders(c *fiber.Ctx, m store.Meta) {
	// `"hex"`, encoded once on the stack (the header copies it).
	var etag [2 + 2*len(m.SHA256)]byte
	etag[0], etag[len(etag)-1] = '"', '"'
	hex.Encode(etag[1:], m.SHA256[:])
	h := &c.Response().Header
	h.SetBytesV(fiber.HeaderETag, etag[:])
	h.SetBytesV(wire.HeaderContentSHA256, etag[1:len(etag)-1])
	h.Set(wire.HeaderCompileSeconds, strconv.FormatFloat(m.CompileSeconds, 'f', -1, 64))
	if m.Backend != "" {
		h.Set(wire.HeaderBackend, m.Backend)
	}
	if m.Name != "" {
		h.Set(wire.HeaderName, m.Name)
	}
	h.Set(fiber.HeaderAcceptRanges, "bytes")
}

// notModified reports whether the request's If-None-Match inm matches m.
func notModified(inm string, m store.Meta) bool {
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

// smallBodyBytes is the largest entry body sent from memory: read whole from
// the store (one short read transaction, fully verified before the status is
// sent) into fasthttp's pooled response buffer and written with the headers.
// Larger bodies stream.
const smallBodyBytes = 64 << 10

// bufReaders holds the 32 KiB readers that streamed bodies peek through.
var bufReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// send sends size bytes of rc (an entry's bytes from the store) as
// the response body and takes ownership of rc. The response status and
// headers other than the content type are set by the caller. hit is
// reported to out once every byte has been read from the store and
// verified, never when the body fails: a streamed body (over
// smallBodyBytes) is read after the handler returns and a later bad chunk
// aborts it mid-way. It is reported before the body's last bytes reach the
// client, on the handler's goroutine or on the one fasthttp writes the
// body from. (Not a callback: a closure over hit cost every small GET two
// allocations.)
func (st *streams) send(c *fiber.Ctx, ns string, key cachekey.Key, rc io.ReadCloser, size int64, out Outcomes, hit Lookup) error {
	c.Response().Header.SetContentType(fiber.MIMEOctetStream)
	if b, ok := rc.(byteser); ok && int64(len(b.Bytes())) == size {
		// An entry from the store's memory (verified when it was cached):
		// fasthttp sends the shared read-only slice without copying it.
		c.Response().SetBodyRaw(b.Bytes())
		_ = rc.Close()
		st.bytesOut.Add(float64(size))
		out.Lookup(hit)
		return nil
	}
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
		st.bytesOut.Add(float64(n))
		out.Lookup(hit)
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
	st.inflight.Add(1) // until fasthttp closes the body: the store stays open
	c.Context().SetBodyStream(&responseBody{r: br, c: rc, st: st, size: size, out: out, hit: hit}, int(size))
	return nil
}

// byteser is a store reader whose bytes are already in memory, read-only.
type byteser interface{ Bytes() []byte }

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
	st   *streams
	once sync.Once
	// size is the body's length; read counts the bytes read so far, and
	// hit is reported to out (send's) when the store's reader ends at
	// size; counted says it was.
	size, read int64
	out        Outcomes
	hit        Lookup
	counted    bool
}

// Read reads from the entry.
func (b *responseBody) Read(p []byte) (n int, err error) {
	defer b.st.recovered(&err, "entry")
	n, err = b.r.Read(p)
	if n > 0 {
		b.count(n)
	}
	if err == io.EOF {
		b.ended()
	}
	return n, err
}

// WriteTo writes the rest of the entry to w in the store's chunk-sized
// writes (fasthttp's copy prefers it to Read, which would go through its 4
// KiB copy buffer: one write system call per 4 KiB).
func (b *responseBody) WriteTo(w io.Writer) (n int64, err error) {
	defer b.st.recovered(&err, "entry")
	n, err = b.r.WriteTo(w)
	if n > 0 {
		b.count(int(n))
	}
	if err == nil { // the store's reader ended without an error
		b.ended()
	}
	return n, err
}

func (b *responseBody) count(n int) {
	b.read += int64(n)
	b.st.bytesOut.Add(float64(n))
}

// ended reports a clean end of the store's reader: the whole entry, every
// chunk verified, was read (a short one is no success).
func (b *responseBody) ended() {
	if b.read == b.size && !b.counted {
		b.counted = true
		b.out.Lookup(b.hit)
	}
}

// Close closes the store reader.
func (b *responseBody) Close() error {
	err := b.c.Close()
	b.once.Do(func() {
		b.r.Reset(nil)
		bufReaders.Put(b.r)
		b.st.inflight.Add(-1)
	})
	return err
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

// parseRange parses a single-range "bytes=" Range header against size. It
// returns ok=false when the header should be ignored (not a bytes range), and
// a 416 *Error when the range is malformed, multiple or unsatisfiable.
func parseRange(h string, size int64) (off, n int64, ok bool, err error) {
	bad := func(format string, args ...any) (int64, int64, bool, error) {
		return 0, 0, false, Errorf(http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable", format, args...)
	}
	h = strings.TrimSpace(h)
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found {
		return 0, -1, false, nil
	}
	sent := echoShaped(h, "bytes=", rangeShape)
	if strings.Contains(spec, ",") {
		return bad("Only a single byte range is supported, got %s.", sent)
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return bad("Range %s is malformed: use bytes=START-END, bytes=START- or bytes=-SUFFIX.", sent)
	}
	switch {
	case first == "": // suffix: last N bytes
		k, perr := strconv.ParseInt(last, 10, 64)
		if perr != nil || k <= 0 {
			return bad("Range %s is malformed: the suffix length must be a positive integer.", sent)
		}
		if size == 0 {
			return bad("Range %s cannot be satisfied: the entry is empty.", sent)
		}
		k = min(k, size)
		return size - k, k, true, nil
	default:
		start, perr := strconv.ParseInt(first, 10, 64)
		if perr != nil || start < 0 {
			return bad("Range %s is malformed: the start must be a non-negative integer.", sent)
		}
		if start >= size {
			return bad("Range %s starts at or after the end of the %d-byte entry.", sent, size)
		}
		end := size - 1
		if last != "" {
			e, perr := strconv.ParseInt(last, 10, 64)
			if perr != nil || e < start {
				return bad("Range %s is malformed: the end must be an integer not below the start.", sent)
			}
			end = min(e, size-1)
		}
		return start, end - start + 1, true, nil
	}
}
