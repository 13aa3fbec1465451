package api

import (
	"crypto/rand"
	"encoding/binary"
	"strconv"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/cachesvc/cachesvc/wire"
)

// requestIDs makes the ids of requests that came without a usable
// X-Request-Id: a random prefix per process and a counter, so ids are
// unique across a fleet's replicas and restarts without a random read per
// request.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

// newRequestIDs returns a generator with a fresh random prefix.
func newRequestIDs() *requestIDs {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return &requestIDs{prefix: strconv.FormatUint(binary.LittleEndian.Uint64(b[:]), 36) + "-"}
}

// appendNext appends a new id to dst.
func (g *requestIDs) appendNext(dst []byte) []byte {
	return strconv.AppendUint(append(dst, g.prefix...), g.n.Add(1), 36)
}

// next returns a new id.
func (g *requestIDs) next() string { return string(g.appendNext(nil)) }

// setRequestID chooses the request's id, unless it has one, and sets it as
// the response's X-Request-Id, which is where requestID reads it: the
// client's X-Request-Id when it is a sane one, else a new one. The
// middleware calls it before the handler (a streamed body's headers leave
// with its first bytes), and the error handler for the answers given
// before the middleware runs, so every answer carries an id. It allocates
// nothing: the header keeps its own copy.
func (s *Server) setRequestID(fctx *fasthttp.RequestCtx) {
	if len(fctx.Response.Header.Peek(wire.HeaderRequestID)) > 0 {
		return
	}
	if v := fctx.Request.Header.Peek(wire.HeaderRequestID); wire.ValidRequestID(v) {
		fctx.Response.Header.SetBytesV(wire.HeaderRequestID, v)
		return
	}
	var buf [64]byte
	fctx.Response.Header.SetBytesV(wire.HeaderRequestID, s.ids.appendNext(buf[:0]))
}

// requestID returns the id of c's request (see setRequestID), choosing it
// if it has none yet.
func (s *Server) requestID(c *fiber.Ctx) string {
	s.setRequestID(c.Context())
	return answeredRequestID(c)
}

// answeredRequestID returns the X-Request-Id of c's response; "" before
// setRequestID ran.
func answeredRequestID(c *fiber.Ctx) string {
	return string(c.Response().Header.Peek(wire.HeaderRequestID))
}

// errorObject returns the error object of an answer that a handler writes
// itself because it carries more than the error (a lookup's miss, a
// lease's 409), naming the request's id as the error handler's answers do.
func errorObject(c *fiber.Ctx, code, message string) wire.ErrorObject {
	return wire.ErrorObject{Code: code, Message: message, RequestID: answeredRequestID(c)}
}
