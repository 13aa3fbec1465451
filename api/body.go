package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"reflect"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/cachesvc/cachesvc/store"
)

// errIncompleteBody means the client stopped sending before the body ended
// (it disconnected, or sent fewer bytes than its Content-Length).
var errIncompleteBody = errors.New("request body ended early")

// errBodyTimeout means the client stopped sending, without disconnecting,
// until the connection's read deadline (paced by Limits.MinTransferRate)
// passed: 408 request_timeout. It is an errIncompleteBody too.
var errBodyTimeout = fmt.Errorf("%w: it stalled past the server's read timeout", errIncompleteBody)

// errTrailerTooLarge means a chunked body's trailer did not fit in the
// connection's read buffer (--max-header-size): 431, as for headers. It is
// an errIncompleteBody too: the body was not read to its end.
var errTrailerTooLarge = fmt.Errorf("%w: its trailer fields are over the header size limit", errIncompleteBody)

// bodyDoneKey marks, in fiber Locals, that the request body was read to its
// end, so the connection can carry another request.
const bodyDoneKey = "cachesvc.body_done"

// bodyBrokenKey marks, in fiber Locals, that reading the request body failed
// mid-stream (a malformed chunk, a read error): where the body ends is then
// unknown, so the connection must close rather than be drained.
const bodyBrokenKey = "cachesvc.body_broken"

// prefetchBytes is how much of a streamed body fasthttp reads with the
// headers; a body this small is always fully in memory.
const prefetchBytes = 8 << 10

// drainLimit bounds how much of an unread request body the server reads and
// discards before answering, so that a client still sending sees the answer
// (say 413) instead of a connection reset. Larger remainders close the
// connection instead, lingering (lingerOnClose).
const drainLimit = 4 << 20

// ambiguousFraming refuses a request whose body length is ambiguous: two
// Content-Length headers with different values, or Content-Length beside
// Transfer-Encoding (RFC 9112, section 6.3). fasthttp reads such a body by
// the last Content-Length, or as chunked, where a proxy in front may have
// used another length and passed the rest on as a second request.
func ambiguousFraming(c *fiber.Ctx) error {
	var length []byte
	hasLength, chunked := false, false
	for name, value := range headerLines(c.Request().Header.RawHeaders()) {
		switch {
		case bytes.EqualFold(name, []byte(fiber.HeaderContentLength)):
			value = bytes.TrimSpace(value)
			if hasLength && !bytes.Equal(value, length) {
				return Errorf(http.StatusBadRequest, "bad_request",
					"The request has Content-Length headers with different values (%s and %s); send one.",
					echoShaped(string(length), "", lengthShape), echoShaped(string(value), "", lengthShape))
			}
			hasLength, length = true, value
		case bytes.EqualFold(name, []byte(fiber.HeaderTransferEncoding)):
			chunked = true
		}
	}
	if hasLength && chunked {
		return Errorf(http.StatusBadRequest, "bad_request",
			"The request has both Content-Length and Transfer-Encoding; send one of them.")
	}
	return nil
}

// headerLines yields the name and value (as sent, untrimmed) of each line of
// raw, a request's header block as received; a line without a colon is
// skipped. fasthttp's parsed headers merge or rewrite what the framing
// checks must see as sent (two Content-Lengths, "gzip, chunked").
func headerLines(raw []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(name, value []byte) bool) {
		rest := raw
		for len(rest) > 0 {
			line := rest
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				line, rest = rest[:i], rest[i+1:]
			} else {
				rest = nil
			}
			name, value, ok := bytes.Cut(line, []byte{':'})
			if ok && !yield(name, value) {
				return
			}
		}
	}
}

// closeIfBodyUnread deals with a streamed request body the handler left
// unread, whose bytes would otherwise be parsed as the next request: like
// net/http, it reads and discards a remainder of at most drainLimit bytes
// (keeping the connection), and otherwise marks the connection to close
// after this response, lingering so that the client gets to read it.
func closeIfBodyUnread(c *fiber.Ctx) {
	req := c.Request()
	if !req.IsBodyStream() {
		return
	}
	if done, _ := c.Locals(bodyDoneKey).(bool); done {
		return
	}
	if refused, _ := c.Locals(expectRefusedKey).(bool); refused {
		// The client waits for the 100 Continue it was never sent: a
		// drain would wait with it. It may send the body all the same.
		c.Locals(bodyDoneKey, true)
		c.Response().Header.SetConnectionClose()
		lingerOnClose(c.Context().Conn())
		return
	}
	if broken, _ := c.Locals(bodyBrokenKey).(bool); broken {
		// Draining would go on parsing from wherever the bad chunk left
		// the stream ("10000000000000005" fails after 16 digits and leaves
		// "5\r\n...", a valid chunk): the bytes after it, which a proxy in
		// front may have framed otherwise, would run as the next request.
		c.Response().Header.SetConnectionClose()
		lingerOnClose(c.Context().Conn())
		return
	}
	cl := req.Header.ContentLength()
	if cl >= 0 && cl <= prefetchBytes {
		return
	}
	c.Locals(bodyDoneKey, true) // never read the stream twice
	if cl <= drainLimit {       // includes chunked (-1)
		n, err := io.Copy(io.Discard, io.LimitReader(c.Context().RequestBodyStream(), drainLimit+1))
		if err == nil && n <= drainLimit {
			return
		}
	}
	c.Response().Header.SetConnectionClose()
	lingerOnClose(c.Context().Conn())
}

// bodyStream returns the request body as a reader that enforces the declared
// Content-Length (ending early is errIncompleteBody, never a short io.EOF) and
// limit (more bytes is store.ErrTooLarge; 0 means no limit), counts bytes with
// count, and marks the body done at its end.
func bodyStream(c *fiber.Ctx, limit int64, count func(int)) *bodyReader {
	var r io.Reader = c.Context().RequestBodyStream()
	if r == nil {
		r = bytes.NewReader(c.Request().Body())
	}
	br := &bodyReader{
		r:     r,
		want:  int64(c.Request().Header.ContentLength()),
		limit: limit,
		count: count,
		done:  func() { c.Locals(bodyDoneKey, true) },
		broke: func() { c.Locals(bodyBrokenKey, true) },
	}
	if tc, ok := c.Context().Conn().(*trackedConn); ok {
		br.peerClosed = tc.sawEOF.Load
	}
	return br
}

// bodyReader is the request body with its length and limit enforced.
type bodyReader struct {
	r     io.Reader
	want  int64 // declared Content-Length; negative when unknown (chunked)
	limit int64
	n     int64
	err   error // sticky
	eof   bool
	count func(int)
	done  func()
	broke func() // the stream itself failed: its end is unknown
	// peerClosed reports whether the client closed the connection; a chunked
	// body that "ends" after that was cut short (fasthttp does not tell).
	peerClosed func() bool
}

// Read reads from the body; see bodyStream.
func (b *bodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.eof {
		return 0, io.EOF
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if n > 0 && b.count != nil {
		b.count(n)
	}
	switch {
	case b.limit > 0 && b.n > b.limit:
		b.err = fmt.Errorf("%w: the body is over the %d-byte limit", store.ErrTooLarge, b.limit)
		return n, b.err
	case errors.Is(err, io.EOF):
		if b.want >= 0 && b.n < b.want {
			b.err = fmt.Errorf("%w: got %d of the %d bytes in Content-Length", errIncompleteBody, b.n, b.want)
			return n, b.err
		}
		if b.want < 0 && b.peerClosed != nil && b.peerClosed() {
			b.err = fmt.Errorf("%w: the client closed the connection after %d bytes, before the last chunk", errIncompleteBody, b.n)
			return n, b.err
		}
		b.eof = true
		if b.done != nil {
			b.done()
		}
		return n, io.EOF
	case err != nil:
		if b.broke != nil {
			b.broke()
		}
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			b.err = fmt.Errorf("%w after %d bytes (send the body faster than serve --min-transfer-rate); nothing was stored", errBodyTimeout, b.n)
			return n, b.err
		}
		// fasthttp's own message quotes the trailer and names a knob
		// (ReadBufferSize) that is --max-header-size here.
		if small := (*fasthttp.ErrSmallBuffer)(nil); errors.As(err, &small) {
			b.err = fmt.Errorf("%w after %d bytes; nothing was stored", errTrailerTooLarge, b.n)
			return n, b.err
		}
		b.err = fmt.Errorf("%w after %d bytes: %w", errIncompleteBody, b.n, err)
		return n, b.err
	}
	return n, nil
}

// Err returns the error that ended reading, if any.
func (b *bodyReader) Err() error { return b.err }

// bodies reads bounded JSON request bodies.
type bodies struct {
	maxJSON int64
	bytesIn prometheus.Counter
	// unknownFields counts the requests that had fields ignored, by
	// route and method (cachesvc_request_unknown_fields_total).
	unknownFields *prometheus.CounterVec
	log           *slog.Logger // the debug line naming ignored fields
}

// readBody reads the whole request body, at most Config.MaxJSONBytes, for
// handlers that need it in memory (JSON requests). A larger body is 413
// body_too_large. Use it instead of c.Body(), which is unbounded when bodies
// are streamed.
func (b bodies) readBody(c *fiber.Ctx) ([]byte, error) {
	limit := b.maxJSON
	if cl := int64(c.Request().Header.ContentLength()); cl > limit {
		return nil, Errorf(http.StatusRequestEntityTooLarge, "body_too_large",
			"The request body is %d bytes; the limit for this endpoint is %d bytes.", cl, limit)
	}
	data, err := io.ReadAll(bodyStream(c, limit, func(n int) { b.bytesIn.Add(float64(n)) }))
	if err != nil {
		if errors.Is(err, store.ErrTooLarge) {
			return nil, Errorf(http.StatusRequestEntityTooLarge, "body_too_large",
				"The request body is over the %d-byte limit for this endpoint.", limit)
		}
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return data, nil
}

// decodeJSON reads the request body with readBody and decodes it into v
// (a pointer to a struct): the one JSON body decoder of every endpoint.
// Malformed JSON is 400 bad_json with a message naming the field and what
// it must be (jsonBodyMessage).
//
// A field v does not have is ignored and named in a Warning header
// (fieldpolicy.go), so that a newer client's optional field reaches an older
// server as if absent; ?field_validation=strict refuses it instead (400
// bad_json), for a client whose field must not be ignored. required names
// the JSON fields without which the handler refuses the body: one missing
// beside an unknown field (a typo, "hodler") is 400 bad_json naming both,
// rather than a warning and the handler's less precise refusal.
func (b bodies) decodeJSON(c *fiber.Ctx, v any, required ...string) error {
	strict, err := strictFields(c)
	if err != nil {
		return err
	}
	data, err := b.readBody(c)
	if err != nil {
		return err
	}
	// Strict first: a body without unknown fields, nearly every one, is
	// parsed once.
	err = decodeOne(data, v, true)
	if strict || err == nil || !isUnknownField(err) {
		return err
	}
	reflect.ValueOf(v).Elem().SetZero() // what the strict pass filled in
	if err := decodeOne(data, v, false); err != nil {
		return err
	}
	unknown, missing := bodyFields(data, v, required)
	if len(missing) > 0 {
		return Errorf(http.StatusBadRequest, "bad_json", "%s", missingFieldMessage(missing[0], unknown, v))
	}
	warnUnknownFields(c, unknown)
	// The route's own pattern and method (not the request's spelling):
	// bounded by the route table.
	b.unknownFields.WithLabelValues(c.Route().Path, c.Route().Method).Inc()
	b.log.Debug("unknown request body fields ignored", requestAttrs(c, "fields", unknown[:min(len(unknown), maxFieldWarnings)], "count", len(unknown))...)
	return nil
}

// decodeOne decodes the JSON value data holds into v, refusing unknown
// fields when strict; an error is 400 bad_json saying what is wrong.
func decodeOne(data []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "bad_json", Message: jsonBodyMessage(err, v), Err: err} // jsonerr.go
	}
	if dec.More() {
		return Errorf(http.StatusBadRequest, "bad_json", "The request body has data after the JSON value.")
	}
	return nil
}
