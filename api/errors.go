package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// Error is an HTTP error with a machine-readable code. Handlers return it (or
// a sentinel from the table below) and errorHandler renders it as
//
//	{"error": {"code": "snake_case", "message": "human sentence", "details": ...}}
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Code is a stable snake_case identifier clients can match.
	Code string
	// Message is a human sentence saying what was wrong and, ideally, how to
	// fix it.
	Message string
	// Details is optional extra JSON (for example a lease holder).
	Details any
	// Err is the cause, if any; it is logged, not shown.
	Err error
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// sentinels maps errors from the layers below to statuses and codes, checked
// in order with errors.Is. Add one line per new sentinel.
var sentinels = []struct {
	err    error
	status int
	code   string
}{
	{store.ErrNotFound, http.StatusNotFound, "not_found"},
	{store.ErrConflict, http.StatusConflict, "conflict"},
	{store.ErrQuarantined, http.StatusConflict, "quarantined"},
	{store.ErrDigestMismatch, http.StatusBadRequest, "digest_mismatch"},
	{store.ErrSizeMismatch, http.StatusBadRequest, "size_mismatch"},
	{store.ErrTooLarge, http.StatusRequestEntityTooLarge, "entry_too_large"},
	{store.ErrQuota, http.StatusInsufficientStorage, "quota_exceeded"}, // a *QuotaError is rendered above
	{store.ErrFull, http.StatusInsufficientStorage, "store_full"},
	{store.ErrCorrupt, http.StatusInternalServerError, "integrity_failure"},
	{store.ErrClosed, http.StatusServiceUnavailable, "store_closed"},
	// 503, not 507: the disk is not full, this replica is broken (its
	// /readyz fails too); another replica, or this one once the directory
	// is writable again, takes the entry.
	{store.ErrDirUnavailable, http.StatusServiceUnavailable, "data_dir_unavailable"},
	{store.ErrUnavailable, http.StatusServiceUnavailable, "shared_tier_unavailable"},
	// A newer replica's record, during a rolling upgrade: this replica
	// cannot serve or replace it; the message says to upgrade it.
	{store.ErrNewerFormat, http.StatusServiceUnavailable, "shared_tier_unavailable"},
	{manifest.ErrUnavailable, http.StatusServiceUnavailable, "shared_tier_unavailable"},
	{store.ErrQueueFull, http.StatusServiceUnavailable, "upload_queue_full"},
	{errAborted, http.StatusServiceUnavailable, "shutting_down"},   // before errIncompleteBody, which wraps it
	{errBodyTimeout, http.StatusRequestTimeout, "request_timeout"}, // before errIncompleteBody, which it wraps
	// Before errIncompleteBody too, which it wraps.
	{errTrailerTooLarge, http.StatusRequestHeaderFieldsTooLarge, "request_header_fields_too_large"},
	{errIncompleteBody, http.StatusBadRequest, "incomplete_body"},
	{keying.ErrMalformed, http.StatusBadRequest, "malformed_signature"},
	{keying.ErrTooLarge, http.StatusRequestEntityTooLarge, "signature_too_large"},
	{keying.ErrUnknownBackend, http.StatusUnprocessableEntity, "unknown_backend"},
	{keying.ErrPluginError, http.StatusUnprocessableEntity, "plugin_error"},
	{keying.ErrPluginFailed, http.StatusUnprocessableEntity, "plugin_failed"},
	{keying.ErrPluginBusy, http.StatusServiceUnavailable, "plugin_busy"},
	{context.Canceled, http.StatusServiceUnavailable, "shutting_down"},
}

// expectedUnavailable are the codes of the 5xx answers that are expected,
// retryable states of a healthy server (it starts, drains or shuts down;
// the shared tier is away; a queue, table or limit is full; a client's
// namespace is over its quota), which clients ride out by retrying or
// compiling themselves: logged at WARN. Every other 5xx (500
// internal_error, integrity_failure, 507 store_full, plugins_failed) is a
// failure someone must look into: ERROR. At ERROR, every rolling restart,
// S3 blip and upload burst paged as a server failure.
var expectedUnavailable = map[string]bool{
	"starting": true, "not_ready": true, "plugins_compiling": true, "shutting_down": true, "store_closed": true,
	"shared_tier_unavailable": true, "fleet_unavailable": true, "upload_queue_full": true,
	"too_many_uploads": true, "too_many_waiters": true, "too_many_connections": true, "lease_table_full": true,
	"plugin_busy": true, "quota_exceeded": true, "too_many_signatures": true,
	// The store logs the directory's failure itself, once, at ERROR.
	"data_dir_unavailable": true,
}

// failureLevel is the level a request answered status (5xx) with error
// code is logged at: WARN for expectedUnavailable, INFO for 501 (the
// client asked for what this server does not do, like a 4xx), ERROR for
// the rest.
func failureLevel(status int, code string) slog.Level {
	switch {
	case status == http.StatusNotImplemented:
		return slog.LevelInfo
	case expectedUnavailable[code]:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// toError translates err to an *Error.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if qe := (*store.QuotaError)(nil); errors.As(err, &qe) {
		// Its own sentence names the namespace and the limit; the
		// wrapping ("put entry ns/key: ...") adds nothing.
		return &Error{Status: http.StatusInsufficientStorage, Code: "quota_exceeded", Message: sentence(qe.Error()), Err: err,
			Details: wire.QuotaDetails{Namespace: qe.Namespace, Limit: qe.Limit, Quota: qe.Quota, Need: qe.Need, InFlight: qe.InFlight}}
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return &Error{Status: s.status, Code: s.code, Message: sentence(err.Error()), Err: err}
		}
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		code := strings.ToLower(strings.ReplaceAll(http.StatusText(fe.Code), " ", "_"))
		if fe.Code == http.StatusNotFound {
			code = "route_not_found"
		}
		if code == "" {
			code = "http_error"
		}
		return &Error{Status: fe.Code, Code: code, Message: sentence(withoutRequestDump(fe.Message)), Err: err}
	}
	return &Error{
		Status:  http.StatusInternalServerError,
		Code:    "internal_error",
		Message: "Internal server error; the server log has the details.",
		Err:     err,
	}
}

// withoutRequestDump cuts from a fasthttp header-parsing error the copy of
// the request it quotes ("... Buffer size=163, contents: \"PUT ...\"",
// "cannot find http request method in \"...\""), which would echo every
// header, Authorization included, in the body.
func withoutRequestDump(msg string) string {
	if !strings.HasPrefix(msg, "error when reading request headers") {
		return msg
	}
	for _, cut := range []string{". Buffer size=", ` in "`} {
		if i := strings.Index(msg, cut); i >= 0 {
			msg = msg[:i]
		}
	}
	return msg
}

// maxShapedEcho bounds a refused header value that echoShaped shows as sent.
const maxShapedEcho = 64

// Shapes of echoShaped: the characters a refused value may have to be shown
// as sent.
const (
	rangeShape  = "0123456789-, " // after "bytes=": a byte range, however wrong
	lengthShape = "0123456789"    // a Content-Length
)

// echoShaped renders v, a header value being refused, for an error
// message. A value of the shape the header has (prefix, then only the
// characters of shape, at most maxShapedEcho bytes) is shown as sent,
// unquoted: it holds no secret and nothing that JSON or a terminal would
// escape, so the message reads "Range bytes=5-1 is malformed" rather than
// carrying \"...\" in its JSON. Any other value is quoted by wire.Echo:
// printable ASCII, and a long one (a pasted token) cut to its start.
func echoShaped(v, prefix, shape string) string {
	rest, ok := strings.CutPrefix(v, prefix)
	if ok && rest != "" && len(v) <= maxShapedEcho && strings.Trim(rest, shape) == "" {
		return v
	}
	return wire.Echo(v)
}

// registeredCodings are the content and transfer codings of IANA's HTTP
// registries, lower case: the words a refused Content-Encoding or
// Transfer-Encoding normally holds.
var registeredCodings = map[string]bool{
	"aes128gcm": true, "br": true, "chunked": true, "compress": true, "dcb": true, "dcz": true,
	"deflate": true, "exi": true, "gzip": true, "identity": true, "pack200-gzip": true,
	"trailers": true, "x-compress": true, "x-gzip": true, "zstd": true,
}

// echoCodings renders v, a refused Content-Encoding or Transfer-Encoding,
// for an error message: a comma-separated list of registered codings (in
// any case, spaces around commas, at most maxShapedEcho bytes) is shown as
// sent, unquoted, as echoShaped shows a Range; anything else (an unknown
// word that may be a secret pasted in the wrong header, a tab) is quoted
// and bounded by wire.Echo.
func echoCodings(v string) string {
	if v == "" || len(v) > maxShapedEcho {
		return wire.Echo(v)
	}
	for c := range strings.SplitSeq(v, ",") {
		if !registeredCodings[strings.ToLower(strings.Trim(c, " "))] {
			return wire.Echo(v)
		}
	}
	return v
}

// sentence capitalizes msg and ends it with a period.
func sentence(msg string) string {
	if msg == "" {
		return msg
	}
	if c := msg[0]; c >= 'a' && c <= 'z' {
		msg = string(c-'a'+'A') + msg[1:]
	}
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// entryHeaders are the headers that describe an entry; an error response
// carries none of them (a GET that failed midway set them first).
var entryHeaders = []string{fiber.HeaderETag, fiber.HeaderAcceptRanges,
	wire.HeaderContentSHA256, wire.HeaderCompileSeconds, wire.HeaderBackend, wire.HeaderName,
	wire.HeaderWriter, wire.HeaderCreated, wire.HeaderRun, wire.HeaderSignature}

// catchShortBodies answers a body of at most prefetchBytes that ends before
// its Content-Length as the documented 400 incomplete_body. fasthttp reads
// such a body with the headers, before any handler runs, and reports the
// short read as a bare io.ErrUnexpectedEOF, which fiber would render as 400
// bad_request ("unparsable HTTP"); longer bodies are streamed and reach the
// handlers' own incomplete_body. As the middleware would, it logs and
// counts the request: route unmatched and method otherMethod, since
// fasthttp has reset the request it failed to read (its method and path
// are gone), and a duration from when the body was found short.
func (s *Server) catchShortBodies() {
	fh := s.app.Server()
	next := fh.ErrorHandler
	fh.ErrorHandler = func(fctx *fasthttp.RequestCtx, err error) {
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			next(fctx, err)
			return
		}
		start := time.Now()
		c := s.app.AcquireCtx(fctx)
		defer s.app.ReleaseCtx(c)
		err = fmt.Errorf("%w: the client sent less than its Content-Length; nothing was stored", errIncompleteBody)
		if herr := s.errorHandler(c, err); herr != nil {
			next(fctx, herr)
		}
		s.recordRequest(c, unmatchedRoute, otherMethod, start, err) // metrics.go
	}
}

// catchUnknownMethods answers a request whose method fiber does not know
// (PROPFIND, a lowercase "get") with the JSON 400 bad_request that every
// error has; fiber itself would answer a text/plain "Invalid http method"
// before any middleware runs. As the middleware would, it logs and counts
// the request, under the method label otherMethod; the log line names the
// method sent (cut to 32 runes on one line) as unknown_method.
func (s *Server) catchUnknownMethods() {
	fh := s.app.Server()
	next := fh.Handler
	fh.Handler = func(fctx *fasthttp.RequestCtx) {
		if knownMethod(fctx.Method()) {
			next(fctx)
			return
		}
		start := time.Now()
		c := s.app.AcquireCtx(fctx)
		defer s.app.ReleaseCtx(c)
		err := Errorf(http.StatusBadRequest, "bad_request", "Method %s is not one this server knows: use GET, HEAD, PUT, POST or DELETE (methods are case-sensitive).", wire.Echo(string(fctx.Method())))
		if herr := s.errorHandler(c, err); herr != nil {
			fh.ErrorHandler(fctx, herr)
		}
		sent := wire.OneLine(strings.ToValidUTF8(string(fctx.Method()), "\uFFFD"), 32)
		s.recordRequest(c, unmatchedRoute, otherMethod, start, err, slog.String("unknown_method", sent)) // metrics.go
	}
}

// refuseTransferCodings answers a request whose Transfer-Encoding is
// anything but chunked alone. A coding besides chunked ("gzip, chunked")
// gets 501, as RFC 9112 asks of a coding the server does not implement:
// fasthttp reads any such body as plain chunked and rewrites the header to
// "chunked", so the compressed bytes would otherwise be stored as the
// executable. Codings that leave the length unknown ("identity", which
// fasthttp reads as no body at all, "chunked, identity", "chunked" twice,
// an empty value) get 400, as RFC 9112 section 6.3 asks: a proxy in front
// may frame such a body otherwise, and fasthttp would run its bytes as the
// next request. Either way the connection closes after the answer. As the
// middleware would, it logs and counts the request (route unmatched: it was
// answered before routing).
func (s *Server) refuseTransferCodings() {
	fh := s.app.Server()
	next := fh.Handler
	fh.Handler = func(fctx *fasthttp.RequestCtx) {
		// A positive Content-Length (every upload that is not chunked)
		// means fasthttp saw no coding it acts on (one beside it is
		// ambiguousFraming's 400). "identity" alone reads as an empty
		// body (length 0, or -2 on a GET), so those are scanned.
		if fctx.Request.Header.ContentLength() > 0 {
			next(fctx)
			return
		}
		err := transferCodingError(fctx.Request.Header.RawHeaders())
		if err == nil {
			next(fctx)
			return
		}
		start := time.Now()
		c := s.app.AcquireCtx(fctx)
		defer s.app.ReleaseCtx(c)
		c.Response().Header.SetConnectionClose()
		lingerOnClose(fctx.Conn())
		if herr := s.errorHandler(c, err); herr != nil {
			fh.ErrorHandler(fctx, herr)
		}
		// Checked before the method is (catchUnknownMethods wraps
		// inside): the label must fold an unknown one.
		s.recordRequest(c, unmatchedRoute, methodLabel(fctx.Method()), start, err) // metrics.go
	}
}

// transferCodingError returns the error for the Transfer-Encoding lines of
// raw (the request's header lines as received), all taken together, or nil
// when there are none or they say chunked alone, in any case.
func transferCodingError(raw []byte) error {
	var codings [][]byte
	var values []string
	for name, value := range headerLines(raw) {
		if !bytes.EqualFold(bytes.TrimSpace(name), []byte(fiber.HeaderTransferEncoding)) {
			continue
		}
		values = append(values, string(bytes.TrimSpace(value)))
		for coding := range bytes.SplitSeq(value, []byte{','}) {
			if coding = bytes.TrimSpace(coding); len(coding) > 0 {
				codings = append(codings, coding)
			}
		}
	}
	if values == nil {
		return nil
	}
	all := strings.Join(values, ", ")
	for _, coding := range codings {
		if !bytes.EqualFold(coding, []byte("chunked")) && !bytes.EqualFold(coding, []byte("identity")) {
			return Errorf(http.StatusNotImplemented, "unsupported_transfer_encoding", "Transfer-Encoding %s is not supported: send the body as is or chunked; nothing was stored.", echoCodings(all))
		}
	}
	if len(codings) != 1 || !bytes.EqualFold(codings[0], []byte("chunked")) {
		return Errorf(http.StatusBadRequest, "bad_request", "Transfer-Encoding %s leaves the body's length unknown: send Content-Length, or Transfer-Encoding: chunked alone; nothing was stored.", echoCodings(all))
	}
	return nil
}

// methodLabel returns the method label of a request answered before
// fiber checked its method: its name when fiber knows it, otherMethod for
// any other token a client sends.
func methodLabel(m []byte) string {
	if knownMethod(m) {
		return methodName(string(m))
	}
	return otherMethod
}

// knownMethod reports whether m is one of the methods fiber routes.
func knownMethod(m []byte) bool {
	for _, k := range fiber.DefaultMethods {
		if string(m) == k {
			return true
		}
	}
	return false
}

// logPanic logs a handler's panic with its stack and the entry it was
// about, and counts it (recover.Config.StackTraceHandler).
func (s *Server) logPanic(c *fiber.Ctx, v any) {
	s.http.panics.Inc()
	s.log.Error("handler panicked; answered 500", requestAttrs(c, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))...)
}

// requestAttrs returns the log attributes naming c's request (method,
// path and, on routes that have them, namespace and key), then more.
func requestAttrs(c *fiber.Ctx, more ...any) []any {
	attrs := append([]any{"method", c.Method(), "path", c.Path()}, more...)
	if id := answeredRequestID(c); id != "" {
		attrs = append(attrs, "request_id", id)
	}
	// fasthttp's own errors (a broken connection, a failed TLS
	// handshake) have no route, where c.Params panics: reqOf is safe.
	if r := reqOf(c); r.Namespace != "" {
		attrs = append(attrs, "namespace", r.Namespace)
		if r.HasKey {
			attrs = append(attrs, "key", r.Key.String())
		}
	}
	return attrs
}

// errorHandler is the app's single error handler: it writes err as the JSON
// error body with its status. Server errors are logged with their cause.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	e := toError(err)
	id := s.requestID(c) // also for the answers given before the middleware runs
	if e.Status == http.StatusRequestHeaderFieldsTooLarge && errors.Is(err, errTrailerTooLarge) {
		e = &Error{Status: e.Status, Code: e.Code, Err: err, Message: fmt.Sprintf("The chunked body's trailer fields are over this server's limit of %d bytes "+
			"(serve --max-header-size): send fewer or shorter trailer fields; nothing was stored.", s.cfg.Limits.MaxHeaderBytes)}
	} else if e.Status == http.StatusRequestHeaderFieldsTooLarge {
		// fasthttp's own "Request Header Fields Too Large" names neither
		// the limit nor that the URL counts toward it.
		e = &Error{Status: e.Status, Code: e.Code, Err: err, Message: fmt.Sprintf("The request line and headers are over this server's limit of %d bytes "+
			"(serve --max-header-size): shorten the URL, or send fewer or shorter headers.", s.cfg.Limits.MaxHeaderBytes)}
	}
	if allow := c.Response().Header.Peek(fiber.HeaderAllow); e.Status == http.StatusMethodNotAllowed && len(allow) > 0 {
		// The router set Allow; say it in the body too, not a bare
		// "Method Not Allowed".
		e = &Error{Status: e.Status, Code: e.Code, Err: err,
			Message: fmt.Sprintf("Method %s is not allowed on this path: use %s.", wire.Echo(c.Method()), allow)}
	}
	if (e.Code == "shared_tier_unavailable" || e.Code == "data_dir_unavailable") && len(c.Response().Header.Peek(fiber.HeaderRetryAfter)) == 0 {
		// As every other 503 does: clients back off while the shared tier
		// is away (the heartbeat probes it every few seconds), or the data
		// directory is (every write looks at it again).
		c.Set(fiber.HeaderRetryAfter, "5")
	}
	if e.Status >= 500 && !isProbe(c) && failureLevel(e.Status, e.Code) >= slog.LevelError {
		// A failure to look into gets a second line with the path and
		// the cause; an expected state has its request line only.
		s.log.Error("request failed", requestAttrs(c, "status", e.Status, "code", e.Code, "err", err)...)
	}
	// A body we did not read to the end cannot be followed by another
	// request on this connection.
	closeIfBodyUnread(c)
	c.Response().ResetBody()
	for _, h := range entryHeaders {
		c.Response().Header.Del(h)
	}
	if c.Method() == fiber.MethodHead {
		// The answer has no body: the code is all it can say of why.
		c.Set(wire.HeaderError, e.Code)
	}
	return c.Status(e.Status).JSON(wire.ErrorBody{Error: wire.ErrorObject{Code: e.Code, Message: e.Message, Details: e.Details, RequestID: id}})
}
