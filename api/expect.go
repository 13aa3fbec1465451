package api

import (
	"bytes"
	"errors"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/cachesvc/cachesvc/api/auth"
)

// expectRefusedKey marks, in fiber Locals, a request that asked "Expect:
// 100-continue" and was refused from its headers (refuseExpectEarly): its
// body was never asked for, so it must not be drained either.
const expectRefusedKey = "cachesvc.expect_refused"

// refuseExpectEarly makes a request with "Expect: 100-continue" that the
// server will refuse from its headers alone get that refusal (401, 403,
// 413) instead of 100 Continue, as RFC 9110 section 10.1.1 asks: fasthttp
// answers 100 before any handler runs, so a client sent a whole upload only
// to be told its token was wrong or the entry too large. Its only hook
// there, ContinueHandler, can answer no more than a bare 417.
//
// So when the headers arrive (HeaderReceived, before fasthttp looks at
// Expect) refusesBeforeBody predicts the refusal; then the Expect header is
// removed (no 100 is sent), the Content-Length set to 0 (fasthttp would
// otherwise wait for the first 8 KiB of a body the client holds back) and
// the connection marked to close (the client may send the body anyway). The
// outermost handler restores the Content-Length before the request is
// routed, and the ordinary handlers answer it, logged and counted as any
// other refusal. A request the prediction lets through gets 100 Continue as
// before.
func (s *Server) refuseExpectEarly() {
	fh := s.app.Server()
	fh.HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
		// A mark left by a request that never reached its handler must
		// not apply to the next one read into the same (pooled) header.
		// (Marks are rare: the common request pays one atomic load.)
		if s.expectMarks.Load() > 0 {
			if _, ok := s.expectRefused.LoadAndDelete(h); ok {
				s.expectMarks.Add(-1)
			}
		}
		// Only uploads carry a body worth sparing; other methods keep
		// fasthttp's answer.
		if !(h.IsPut() || h.IsPost()) || !bytes.Equal(h.Peek(fasthttp.HeaderExpect), []byte("100-continue")) || !s.refusesBeforeBody(h) {
			return fasthttp.RequestConfig{}
		}
		cl := h.ContentLength()
		h.Del(fasthttp.HeaderExpect)
		h.SetConnectionClose()
		if cl > 0 {
			h.SetContentLength(0)
		}
		s.expectRefused.Store(h, cl)
		s.expectMarks.Add(1)
		return fasthttp.RequestConfig{}
	}
	next := fh.Handler
	fh.Handler = func(fctx *fasthttp.RequestCtx) {
		if s.expectMarks.Load() == 0 {
			next(fctx)
			return
		}
		if v, ok := s.expectRefused.LoadAndDelete(&fctx.Request.Header); ok {
			s.expectMarks.Add(-1)
			if cl, _ := v.(int); cl > 0 {
				fctx.Request.Header.SetContentLength(cl)
			}
			fctx.SetUserValue(expectRefusedKey, true)
		}
		next(fctx)
	}
}

// refusesBeforeBody reports whether the request with headers h will be
// refused before its body is read: it needs a token it lacks (or one
// without the scope), or it uploads an entry whose Content-Length is over
// MaxEntryBytes. It has no side effect; the handlers decide again, and
// count and log the refusal.
func (s *Server) refusesBeforeBody(h *fasthttp.RequestHeader) bool {
	path, _, _ := strings.Cut(string(h.RequestURI()), "?")
	r, params, ok := s.matchRoute(string(h.Method()), path)
	if !ok {
		return false
	}
	if s.cfg.Auth != nil && !r.Access.Public {
		tok, err := parseBearer(string(h.Peek(fasthttp.HeaderAuthorization)))
		if err != nil {
			return true
		}
		ns, _ := decodeParam("ns", params["ns"])
		_, err = s.checkToken(tok, r.Access, accessNamespace(r.Access, ns))
		if errors.Is(err, auth.ErrUnauthenticated) || errors.Is(err, auth.ErrForbidden) {
			return true
		}
	}
	// Of the uploads only the entry PUT is bounded by MaxEntryBytes as a
	// whole; an import bounds each entry in its archive.
	return r.Upload && r.Method == http.MethodPut && s.cfg.MaxEntryBytes > 0 &&
		int64(h.ContentLength()) > s.cfg.MaxEntryBytes
}

// matchRoute returns the route of the table that fiber will route method
// and path (as sent, without its query) to, with its parameters: the first
// declared whose pattern matches, ASCII letters in any case and trailing
// slashes ignored, as fiber's router does without CaseSensitive and
// StrictRouting; HEAD falls back to GET (register). ok is false when none
// matches, or the path is not in origin form.
func (s *Server) matchRoute(method, path string) (r Route, params map[string]string, ok bool) {
	if !strings.HasPrefix(path, "/") {
		return Route{}, nil, false
	}
	if len(path) > 1 {
		path = "/" + strings.TrimRight(path[1:], "/")
	}
	for _, m := range []string{method, http.MethodGet} {
		for _, r := range s.table {
			if r.Method != m {
				continue
			}
			if params, ok := matchPattern(r.Path, path); ok {
				return r, params, true
			}
		}
		if method != http.MethodHead {
			break
		}
	}
	return Route{}, nil, false
}

// matchPattern matches path against a route pattern of literal segments
// and ":name" parameters (each one whole, non-empty segment).
func matchPattern(pattern, path string) (map[string]string, bool) {
	ps := strings.Split(pattern, "/")
	xs := strings.Split(path, "/")
	if len(ps) != len(xs) {
		return nil, false
	}
	params := map[string]string{}
	for i, p := range ps {
		switch {
		case strings.HasPrefix(p, ":"):
			if xs[i] == "" {
				return nil, false
			}
			params[p[1:]] = xs[i]
		case !asciiEqualFold(p, xs[i]):
			return nil, false
		}
	}
	return params, true
}

// asciiEqualFold reports whether a and b are equal with ASCII letters in
// any case (fiber lowercases ASCII only; strings.EqualFold folds Unicode).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
