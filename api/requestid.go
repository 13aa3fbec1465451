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

// requestIDKey holds the request's id in fasthttp's user values (fiber
// Locals), which fasthttp resets between the requests of a connection.
const requestIDKey = "cachesvc.request_id"

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

// next returns a new id.
func (g *requestIDs) next() string {
	return g.prefix + strconv.FormatUint(g.n.Add(1), 36)
}

// requestID returns the id of c's request, choosing it on the first call
// (the client's X-Request-Id when it is a sane one, else a new one) and
// setting it as the response's X-Request-Id. Every path that answers a
// request calls it: the middleware, the error handler (for the requests
// answered before routing), so the id is on every answer.
func (s *Server) requestID(c *fiber.Ctx) string {
	return s.requestIDOf(c.Context())
}

// requestIDOf is requestID on fasthttp's context.
func (s *Server) requestIDOf(fctx *fasthttp.RequestCtx) string {
	if id, ok := fctx.UserValue(requestIDKey).(string); ok {
		return id
	}
	id := ""
	if v := fctx.Request.Header.Peek(wire.HeaderRequestID); validRequestID(v) {
		id = string(v) // a copy: the header's bytes are reused
	} else {
		id = s.ids.next()
	}
	fctx.SetUserValue(requestIDKey, id)
	fctx.Response.Header.Set(wire.HeaderRequestID, id)
	return id
}

// validRequestID reports whether a client's id can be taken as is: 1 to
// wire.MaxRequestIDLen characters of A-Z a-z 0-9 . _ : -. Anything else (a
// newline, quotes, a megabyte) would make log lines and headers unsafe to
// echo, so it is replaced, never echoed.
func validRequestID(v []byte) bool {
	if len(v) == 0 || len(v) > wire.MaxRequestIDLen {
		return false
	}
	for _, b := range v {
		switch {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '.', b == '_', b == ':', b == '-':
		default:
			return false
		}
	}
	return true
}
