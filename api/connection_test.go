package api_test

// Tests of what a connection's life does to an upload: a client that goes
// away, a request rejected before its body is read, a server shut down
// under a stalled upload. Nothing partial may be left visible.

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestClientDisconnectMidUpload cuts uploads short at the TCP level and
// checks nothing is stored and the server keeps serving.
func TestClientDisconnectMidUpload(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name    string
		headers string
	}{
		{"content-length", "Content-Length: 10485760\r\n"},
		{"chunked", "Transfer-Encoding: chunked\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := keyOf("disconnect-" + tc.name)
			before := srv.Metric(`cachesvc_puts_total{result="incomplete"}`)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "PUT /v1/default/entries/%s HTTP/1.1\r\nHost: x\r\n%s\r\n", key, tc.headers)
			chunk := make([]byte, 64<<10)
			for i := 0; i < 32; i++ { // 2 MiB of 10
				if strings.Contains(tc.headers, "chunked") {
					fmt.Fprintf(conn, "%x\r\n", len(chunk))
					conn.Write(chunk)
					conn.Write([]byte("\r\n"))
				} else {
					conn.Write(chunk)
				}
			}
			conn.Close()
			// Wait for the server to notice (no fixed sleep: poll the counter).
			deadline := time.Now().Add(30 * time.Second)
			for srv.Metric(`cachesvc_puts_total{result="incomplete"}`) < before+1 {
				if time.Now().After(deadline) {
					t.Fatal("server did not record the aborted upload")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if st, _, _ := getDigest(t, srv, "default", key); st != 404 {
				t.Errorf("GET after aborted upload = %d, want 404", st)
			}
		})
	}
	if u := srv.Store.Usage(); u.Entries != 0 || u.Bytes != 0 {
		t.Errorf("usage after aborted uploads = %+v", u)
	}
}

// TestShortBodyIsIncomplete sends bodies shorter than their Content-Length
// and half-closes: small ones (read by fasthttp with the headers) and
// streamed ones alike must answer 400 incomplete_body, store nothing, and
// leave the server serving.
func TestShortBodyIsIncomplete(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name     string
		path     string
		declared int
		sent     int
	}{
		{"entry small", "/v1/default/entries/" + keyOf("short-small"), 100, 50},
		{"entry at prefetch", "/v1/default/entries/" + keyOf("short-8k"), 8 << 10, 4 << 10},
		{"entry streamed", "/v1/default/entries/" + keyOf("short-20k"), 20000, 10000},
		{"signature small", "/v1/default/keys", 100, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			method := "PUT"
			if !strings.Contains(tc.path, "/entries/") {
				method = "POST"
			}
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s",
				method, tc.path, tc.declared, strings.Repeat("z", tc.sent))
			conn.(*net.TCPConn).CloseWrite()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(body), `"code":"incomplete_body"`) {
				t.Errorf("status %d, body %s; want 400 incomplete_body", resp.StatusCode, body)
			}
		})
	}
	for _, name := range []string{"short-small", "short-8k", "short-20k"} {
		if st, _, _ := getDigest(t, srv, "default", keyOf(name)); st != 404 {
			t.Errorf("GET %s after a short upload = %d, want 404", name, st)
		}
	}
	// Each is counted: the streamed one by its route; the small ones,
	// answered as fasthttp read them (which forgets their method and path),
	// as unmatched _other.
	m := string(apitest.ReadAll(t, srv.Do(http.MethodGet, srv.URL+"/metrics", nil)))
	for _, want := range []string{
		`cachesvc_http_requests_total{method="PUT",route="/v1/:ns/entries/:key",status="400"} 1`,
		`cachesvc_http_requests_total{method="_other",route="unmatched",status="400"} 3`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s; request lines:\n%s", want, grepLines(m, "cachesvc_http_requests_total"))
		}
	}
}

// TestStalledBodyIsTimeout sends part of a body and then nothing, without
// closing: past the read deadline the client gets the documented 408
// request_timeout (naming --min-transfer-rate), not a 400 quoting the
// socket's "i/o timeout", and nothing is stored.
func TestStalledBodyIsTimeout(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) {
		c.Limits.ReadTimeout = 300 * time.Millisecond
		c.Limits.MinTransferRate = 64 << 10
	}})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /v1/default/entries/%s HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n%s", keyOf("stalled"), strings.Repeat("z", 20000))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"code":"request_timeout"`) || !strings.Contains(string(body), "--min-transfer-rate") {
		t.Errorf("status %d, body %s; want 408 request_timeout naming --min-transfer-rate", resp.StatusCode, body)
	}
	if st, _, _ := getDigest(t, srv, "default", keyOf("stalled")); st != http.StatusNotFound {
		t.Errorf("GET after a stalled upload = %d, want 404", st)
	}
}

// TestAmbiguousFramingRefused sends requests whose body length a proxy in
// front could read differently (RFC 9112, 6.3): they get 400 and a closed
// connection, nothing is stored, and the bytes after the shorter length are
// never run as a request. Unambiguous framings are served.
func TestAmbiguousFramingRefused(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	addr := strings.TrimPrefix(srv.URL, "http://")
	victim := keyOf("framing-victim")
	if resp, body := put(t, srv, "default", victim, 1, 100); resp.StatusCode != 201 {
		t.Fatalf("PUT victim = %d %s", resp.StatusCode, body)
	}
	smuggled := "DELETE /v1/default/entries/" + victim + " HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct {
		name    string
		headers string
		body    string
		want    int
	}{
		{"two lengths", fmt.Sprintf("Content-Length: 5\r\nContent-Length: %d\r\n", 5+len(smuggled)), "hello" + smuggled, 400},
		{"two lengths, spelled apart", fmt.Sprintf("content-length: %d\r\nCONTENT-LENGTH:5\r\n", 5+len(smuggled)), "hello" + smuggled, 400},
		{"length and chunked", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n", 400},
		{"chunked and length", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "5\r\nhello\r\n0\r\n\r\n", 400},
		{"one length twice", "Content-Length: 5\r\nContent-Length: 5\r\n", "hello", 201},
		{"chunked", "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n", 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := keyOf("framing-" + tc.name)
			resp, body, br, conn := rawExchange(t, addr, fmt.Sprintf("PUT /v1/default/entries/%s HTTP/1.1\r\nHost: x\r\n%s\r\n%s", key, tc.headers, tc.body))
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, body %s; want %d", resp.StatusCode, body, tc.want)
			}
			if tc.want != 400 {
				return
			}
			if !resp.Close || !strings.Contains(string(body), `"code":"bad_request"`) {
				t.Errorf("close %v, body %s; want bad_request and a closed connection", resp.Close, body)
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if extra, _ := io.ReadAll(br); len(extra) > 0 {
				t.Errorf("the connection answered again after the 400: %q", extra)
			}
			if st, _, _ := getDigest(t, srv, "default", key); st != 404 {
				t.Errorf("GET after a refused upload = %d, want 404", st)
			}
		})
	}
	if st, _, _ := getDigest(t, srv, "default", victim); st != 200 {
		t.Errorf("GET victim = %d, want 200: a smuggled request ran", st)
	}
}

// TestTransferCodingsBesideChunkedRefused: a body sent with a transfer
// coding the server does not implement ("gzip, chunked") gets 501
// unsupported_transfer_encoding and nothing is stored; fasthttp alone
// de-chunks it and would store the gzip bytes as the executable. Chunked
// alone, in any case, is served.
func TestTransferCodingsBesideChunkedRefused(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		te    string
		want  int
		named string // what the message shows of te, when not te itself
	}{
		{"gzip, chunked", http.StatusNotImplemented, ""},
		{"GZIP,chunked", http.StatusNotImplemented, ""},
		// An unregistered coding may be a secret in the wrong header: a
		// value as long as this is cut to its start (echoCodings).
		{"x-custom, chunked", http.StatusNotImplemented, "(17 bytes, not shown in full"},
		{"Chunked", http.StatusCreated, ""},
		{"chunked", http.StatusCreated, ""},
	} {
		t.Run(tc.te, func(t *testing.T) {
			key := keyOf("coding-" + tc.te)
			resp, body, _, _ := rawExchange(t, addr, fmt.Sprintf("PUT /v1/default/entries/%s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: %s\r\n\r\n5\r\nhello\r\n0\r\n\r\n", key, tc.te))
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, body %s; want %d", resp.StatusCode, body, tc.want)
			}
			if tc.want == http.StatusCreated {
				return
			}
			named := cmp.Or(tc.named, tc.te)
			if !strings.Contains(string(body), `"code":"unsupported_transfer_encoding"`) || !strings.Contains(string(body), named) {
				t.Errorf("body %s: want unsupported_transfer_encoding naming %q", body, named)
			}
			if st, _, _ := getDigest(t, srv, "default", key); st != 404 {
				t.Errorf("GET after a refused upload = %d, want 404", st)
			}
		})
	}
	// An unknown method is refused for its coding first; its label still
	// folds into _other.
	resp, _, _, _ := rawExchange(t, addr, "FOO /v1/default/entries/"+keyOf("foo")+" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("FOO with gzip, chunked = %d, want 501", resp.StatusCode)
	}
	// Refused before fiber routes them, they are counted all the same.
	m := string(apitest.ReadAll(t, srv.Do(http.MethodGet, srv.URL+"/metrics", nil)))
	for _, want := range []string{
		`cachesvc_http_requests_total{method="PUT",route="unmatched",status="501"} 3`,
		`cachesvc_http_requests_total{method="_other",route="unmatched",status="501"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s; request lines:\n%s", want, grepLines(m, "cachesvc_http_requests_total"))
		}
	}
}

// rawExchange sends req, as written, on a new connection to addr (closed at
// the test's end) and returns the response with its body read, the reader
// for anything after it, and the connection.
func rawExchange(t *testing.T, addr, req string) (*http.Response, []byte, *bufio.Reader, net.Conn) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body, br, conn
}

// TestUnparsableRequestEchoesNoHeaders: a 400 for headers fasthttp cannot
// parse says what is wrong without copying the request (and so its bearer
// token) into the body.
func TestUnparsableRequestEchoesNoHeaders(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name    string
		request string
		want    string
	}{
		{"negative length", "PUT /v1/default/entries/" + keyOf("dump") + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cr3t-token\r\nContent-Length: -1\r\n\r\n", "cannot parse Content-Length"},
		{"no method", "GARBAGE\r\nAuthorization: Bearer s3cr3t-token\r\n\r\n", "Error when reading request headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, tc.request)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 400 || !strings.Contains(string(body), tc.want) {
				t.Errorf("status %d, body %s; want 400 naming %q", resp.StatusCode, body, tc.want)
			}
			if strings.Contains(string(body), "s3cr3t-token") || strings.Contains(string(body), "Buffer size") {
				t.Errorf("the error body copies the request: %s", body)
			}
		})
	}
}

// TestEarlyRejectionClosesConnection checks that a response sent before the
// body was read does not let the unread body be parsed as the next request.
func TestEarlyRejectionClosesConnection(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{MaxEntryBytes: 1 << 20})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The body itself looks like a request: it must never be executed.
	// (Over drainLimit, so the server closes rather than drains.)
	smuggled := "DELETE /v1/default/entries/" + keyOf("x") + " HTTP/1.1\r\nHost: x\r\n\r\n"
	body := smuggled + strings.Repeat("a", 8<<20-len(smuggled))
	fmt.Fprintf(conn, "PUT /v1/default/entries/%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", keyOf("early"), len(body))
	go io.WriteString(conn, body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 || !resp.Close {
		t.Errorf("status %d, Connection close %v; want 413 and close", resp.StatusCode, resp.Close)
	}
}

// TestEarlyRejectionReachesClientStillSending checks that a client still
// sending a large body when the server refuses it reads the refusal (413,
// or a 400 for an import that is not a tar) rather than a connection
// reset: Go's HTTP client, like Python's, writes the whole body before it
// reads the answer.
func TestEarlyRejectionReachesClientStillSending(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{MaxEntryBytes: 1 << 20, MaxBytes: 4 << 20})
	const size = 48 << 20
	for _, tc := range []struct {
		method, url, want string
		status            int
	}{
		{http.MethodPut, srv.EntryURL("default", keyOf("too big")), "entry_too_large", http.StatusRequestEntityTooLarge},
		{http.MethodPost, srv.URL + "/v1/default/import", "bad_tar", http.StatusBadRequest}, // not a tar
	} {
		for i := 0; i < 3; i++ {
			req, err := http.NewRequest(tc.method, tc.url, io.LimitReader(filler('g'), size))
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = size
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s, try %d: %v; want the server's %d", tc.method, tc.url, i, err, tc.status)
			}
			body := apitest.ReadAll(t, resp)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("%s %s: %d %s; want %d %s", tc.method, tc.url, resp.StatusCode, body, tc.status, tc.want)
			}
		}
	}
}

// filler reads as an endless run of its byte.
type filler byte

// Read fills p with the byte.
func (f filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(f)
	}
	return len(p), nil
}

// TestEarlyRejectionDrainsSmallBody checks that a rejected body of a few
// MiB is read and discarded: the client gets its 413 (not a reset) and the
// connection serves the next request.
func TestEarlyRejectionDrainsSmallBody(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{MaxEntryBytes: 1 << 20})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i := 0; i < 2; i++ {
		fmt.Fprintf(conn, "PUT /v1/default/entries/%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", keyOf("drain"), 2<<20)
		errc := make(chan error, 1)
		go func() { _, err := conn.Write(make([]byte, 2<<20)); errc <- err }()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := <-errc; err != nil {
			t.Fatalf("request %d: writing the body: %v", i, err)
		}
		if resp.StatusCode != 413 || resp.Close {
			t.Fatalf("request %d: status %d, close %v, body %s; want 413 on a kept connection", i, resp.StatusCode, resp.Close, body)
		}
	}
}

// TestShutdownAbortsStalledUpload checks that Shutdown returns within its
// grace period plus the abort wait, that the stalled upload stores nothing,
// and that the log calls it what it was: cut short by the shutdown (503
// shutting_down), not a client too slow for --min-transfer-rate (408).
func TestShutdownAbortsStalledUpload(t *testing.T) {
	var logs syncBuffer
	srv := apitest.Start(t, apitest.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	key := keyOf("stalled")
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest(http.MethodPut, srv.EntryURL("default", key), pr)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	pw.Write(make([]byte, 256<<10))
	// Wait until the server is inside the handler.
	deadline := time.Now().Add(10 * time.Second)
	for srv.Metric(`cachesvc_bytes_in_total`) <= 0 {
		if time.Now().After(deadline) {
			t.Fatal("upload never reached the server")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := contextWithTimeout(200 * time.Millisecond)
	defer cancel()
	if err := srv.API.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	pw.Close()
	<-done
	if u := srv.Store.Usage(); u.Entries != 0 {
		t.Errorf("entries after aborted upload = %d", u.Entries)
	}
	if l := logs.String(); !strings.Contains(l, `"status":503`) || !strings.Contains(l, "shutdown-grace ran out") ||
		strings.Contains(l, "min-transfer-rate") || strings.Contains(l, `"status":408`) {
		t.Errorf("the aborted upload is logged as something else than cut short by the shutdown:\n%s", l)
	}
	srv.Restart()
	if st, _, _ := getDigest(t, srv, "default", key); st != 404 {
		t.Errorf("GET after restart = %d, want 404", st)
	}
}
