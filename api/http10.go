package api

import (
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// answerHTTP10CloseDelimited sends a streamed answer of unknown length (an
// export, a run manifest) to an HTTP/1.0 client without chunking, its end
// marked by closing the connection (RFC 9112 section 6.3). fasthttp chunks
// every such body whatever the request's version, and an HTTP/1.0 client
// (curl --http1.0, an old wget, a proxy speaking 1.0 upstream as nginx
// does by default) cannot read chunked coding: it saved the chunk sizes
// into the tar. The answer is written on the hijacked connection, after the
// handlers have run, logged and counted it as usual. A stream cut short is
// then indistinguishable from its end by the framing: the export's last
// member (export.json) and the manifest's closing brace still tell.
func (s *Server) answerHTTP10CloseDelimited() {
	fh := s.app.Server()
	next := fh.Handler
	fh.Handler = func(fctx *fasthttp.RequestCtx) {
		next(fctx)
		resp := &fctx.Response
		if fctx.Request.Header.IsHTTP11() || fctx.IsHead() || !resp.IsBodyStream() || resp.Header.ContentLength() >= 0 {
			return
		}
		resp.Header.Del(fasthttp.HeaderTransferEncoding)
		resp.Header.SetConnectionClose()
		head := resp.Header.AppendBytes(nil)
		fctx.HijackSetNoResponse(true)
		fctx.Hijack(func(conn net.Conn) {
			// fasthttp releases fctx, and so resp, only when this
			// returns, and closes conn.
			defer func() { _ = resp.CloseBodyStream() }()
			// Paced by bytes moved (secureListener), as fasthttp's own
			// writes are; it cleared the deadlines before handing over.
			_ = conn.SetWriteDeadline(time.Now().Add(s.cfg.Limits.WriteTimeout))
			if _, err := conn.Write(head); err != nil {
				return
			}
			_, _ = io.Copy(conn, resp.BodyStream())
		})
	}
}
