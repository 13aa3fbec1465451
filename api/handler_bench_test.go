package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/plugins/builtin/xla/xlacanon"
)

// The BenchmarkHandler* benchmarks call the server's fasthttp handler
// directly (middleware, auth, limits, the route's handler, writing the
// response to io.Discard) against a real Badger store, with no client and
// no sockets, so their allocation counts are the server's own per request.
//
//	go test -run '^$' -bench Handler -benchmem ./api/

// handlerSizes are the entry sizes of the handler benchmarks.
var handlerSizes = []int64{4 << 10, 64 << 10, 1 << 20, 64 << 20}

func sizeName(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// serveOnce runs one request through h and writes its response (streaming
// a body stream to its end) to w.
func serveOnce(b *testing.B, h fasthttp.RequestHandler, ctx *fasthttp.RequestCtx, w *bufio.Writer, wantStatus int) {
	h(ctx)
	if err := ctx.Response.Write(w); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if got := ctx.Response.StatusCode(); got != wantStatus {
		b.Fatalf("status %d, want %d: %s", got, wantStatus, ctx.Response.Body())
	}
}

func putForBench(b *testing.B, srv *apitest.Server, url string, body io.Reader, size int64) {
	req, _ := http.NewRequest(http.MethodPut, url, body)
	req.ContentLength = size
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	apitest.ReadAll(b, resp)
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("PUT: %d", resp.StatusCode)
	}
}

// BenchmarkHandlerGetEntry is a GET hit of one stored entry, logged as
// scripts/bench/run.sh logs (warn: no line per request).
func BenchmarkHandlerGetEntry(b *testing.B) {
	warn := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, size := range handlerSizes {
		b.Run(sizeName(size), func(b *testing.B) {
			srv := apitest.Start(b, apitest.Options{Logger: warn})
			key := keyOf(fmt.Sprint("handler-get", size))
			putForBench(b, srv, srv.EntryURL("default", key), newPayload(7, size), size)
			h := srv.API.App().Handler()
			uri := "/v1/default/entries/" + key
			w := bufio.NewWriter(io.Discard)
			var ctx fasthttp.RequestCtx
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				ctx.Request.Reset()
				ctx.Response.Reset()
				ctx.Request.Header.SetMethod(http.MethodGet)
				ctx.Request.SetRequestURI(uri)
				serveOnce(b, h, &ctx, w, http.StatusOK)
			}
		})
	}
}

// repeatReader yields size bytes of block, repeated.
type repeatReader struct {
	block []byte
	left  int64
	off   int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.left > 0 {
		m := copy(p[n:min(len(p), n+int(min(r.left, int64(len(r.block)-r.off))))], r.block[r.off:])
		n += m
		r.left -= int64(m)
		r.off = (r.off + m) % len(r.block)
	}
	return n, nil
}

// BenchmarkHandlerPutEntry is a PUT of a new entry (distinct bytes each
// time, so nothing is deduplicated).
func BenchmarkHandlerPutEntry(b *testing.B) {
	for _, size := range []int64{4 << 10, 64 << 20} {
		b.Run(sizeName(size), func(b *testing.B) {
			srv := apitest.Start(b, apitest.Options{})
			h := srv.API.App().Handler()
			w := bufio.NewWriter(io.Discard)
			block := make([]byte, 64<<10)
			_, _ = newPayload(9, int64(len(block))).Read(block)
			var ctx fasthttp.RequestCtx
			b.SetBytes(size)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				copy(block, fmt.Sprintf("%016d", i)) // new bytes, no dedup
				ctx.Request.Reset()
				ctx.Response.Reset()
				ctx.Request.Header.SetMethod(http.MethodPut)
				ctx.Request.SetRequestURI("/v1/default/entries/" + keyOf(fmt.Sprint("handler-put", size, i)))
				ctx.Request.SetBodyStream(&repeatReader{block: block, left: size}, int(size))
				serveOnce(b, h, &ctx, w, http.StatusCreated)
			}
		})
	}
}

// BenchmarkHandlerLookupHit is POST /v1/{ns}/lookup of a 1 MiB xla module
// whose key is memoized (the repeat lookup a trainer makes): digest of the
// signature, memo, store hit, a 64 KiB executable streamed back.
func BenchmarkHandlerLookupHit(b *testing.B) {
	k, _ := builtinKeyer(b, nil)
	srv := apitest.Start(b, apitest.Options{API: func(c *api.Config) { c.Keyer = k }})
	sig, err := json.Marshal(map[string]any{"backend": "xla", "platform": "cpu", "jaxlib_version": "bench",
		"xla_flags": []string{"--xla_cpu_enable_fast_math=false"}, "module": string(xlacanon.GenerateModule(1 << 20))})
	if err != nil {
		b.Fatal(err)
	}
	res, err := k.Key(context.Background(), sig)
	if err != nil {
		b.Fatal(err)
	}
	const exe = 64 << 10
	putForBench(b, srv, srv.EntryURL("bench", res.Key.String()), newPayload(3, exe), exe)
	h := srv.API.App().Handler()
	w := bufio.NewWriter(io.Discard)
	var rctx fasthttp.RequestCtx
	b.SetBytes(int64(len(sig)))
	b.ReportAllocs()
	for b.Loop() {
		rctx.Request.Reset()
		rctx.Response.Reset()
		rctx.Request.Header.SetMethod(http.MethodPost)
		rctx.Request.Header.SetContentType("application/json")
		rctx.Request.SetRequestURI("/v1/bench/lookup")
		rctx.Request.SetBodyStream(bytes.NewReader(sig), len(sig))
		serveOnce(b, h, &rctx, w, http.StatusOK)
	}
}
