package api_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestUnknownBodyLengthRefused sends uploads whose body length a proxy in
// front could frame otherwise than the server (RFC 9112, 6.3): a
// Transfer-Encoding other than chunked alone, or a chunk size that fails to
// parse. Each gets its error and a closed connection, nothing is stored,
// and the bytes after it, a request of their own, never run.
func TestUnknownBodyLengthRefused(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	addr := strings.TrimPrefix(srv.URL, "http://")
	victim := keyOf("unknown-length-victim")
	if resp, body := put(t, srv, "default", victim, 1, 100); resp.StatusCode != 201 {
		t.Fatalf("PUT victim = %d %s", resp.StatusCode, body)
	}
	smuggled := "DELETE /v1/default/entries/" + victim + " HTTP/1.1\r\nHost: x\r\n\r\n"
	chunked := "5\r\nhello\r\n0\r\n\r\n"
	for _, tc := range []struct {
		name, headers, body string
		status              int
		code                string
	}{
		// fasthttp reads "identity" as no body: the body would be the next request.
		{"identity", "Transfer-Encoding: identity\r\n", smuggled, 400, "bad_request"},
		{"Identity", "Transfer-Encoding: Identity\r\n", chunked + smuggled, 400, "bad_request"},
		{"chunked then identity", "Transfer-Encoding: chunked, identity\r\n", chunked + smuggled, 400, "bad_request"},
		{"identity then chunked", "Transfer-Encoding: identity, chunked\r\n", chunked + smuggled, 400, "bad_request"},
		{"chunked twice", "Transfer-Encoding: chunked, chunked\r\n", chunked + smuggled, 400, "bad_request"},
		{"two lines", "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n", chunked + smuggled, 400, "bad_request"},
		{"empty", "Transfer-Encoding: \r\n", chunked + smuggled, 400, "bad_request"},
		{"gzip", "Transfer-Encoding: gzip, chunked\r\n", chunked + smuggled, 501, "unsupported_transfer_encoding"},
		// The size fails after 16 hex digits and leaves "5\r\n", a valid
		// chunk: draining from there would run the request after it.
		{"chunk size overflow", "Transfer-Encoding: chunked\r\n", "10000000000000005\r\nhello\r\n0\r\n\r\n" + smuggled, 400, "incomplete_body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := keyOf("unknown-length-" + tc.name)
			resp, body, br, conn := rawExchange(t, addr, fmt.Sprintf("PUT /v1/default/entries/%s HTTP/1.1\r\nHost: x\r\n%s\r\n%s", key, tc.headers, tc.body))
			if resp.StatusCode != tc.status || !strings.Contains(string(body), `"code":"`+tc.code+`"`) {
				t.Fatalf("status %d, body %s; want %d %s", resp.StatusCode, body, tc.status, tc.code)
			}
			if !resp.Close {
				t.Errorf("the connection stays open after %d %s", resp.StatusCode, body)
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if extra, _ := io.ReadAll(br); len(extra) > 0 {
				t.Errorf("the connection answered again: %q", extra)
			}
			if st, _, _ := getDigest(t, srv, "default", key); st != http.StatusNotFound {
				t.Errorf("GET after a refused upload = %d, want 404", st)
			}
		})
	}
	if st, _, _ := getDigest(t, srv, "default", victim); st != 200 {
		t.Errorf("GET victim = %d, want 200: a smuggled request ran", st)
	}
}
