package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
)

// TestExpectContinueAnsweredFinalWhenKnown checks RFC 9110 section 10.1.1:
// a request with "Expect: 100-continue" that the server will refuse from
// its headers alone (no or a wrong token, a Content-Length over
// --max-entry-size) gets that final answer instead of 100 Continue, so the
// client never sends the body; one it will accept gets 100 Continue, and
// then its answer.
func TestExpectContinueAnsweredFinalWhenKnown(t *testing.T) {
	srv := secureServer(t, nil, func(c *api.Config) { c.MaxEntryBytes = 1 << 20 })
	addr := strings.TrimPrefix(srv.URL, "http://")
	none := authtest.Token{}
	for _, tc := range []struct {
		name       string
		path       string
		tok        authtest.Token
		length     int // -1: chunked
		wantStatus int
		wantCode   string
	}{
		{"no token", "/v1/default/entries/" + entryKey("e1"), none, 100, 401, "unauthorized"},
		{"unknown token", "/v1/default/entries/" + entryKey("e2"), authtest.Token{Secret: "nope"}, 100, 401, "unauthorized"},
		{"no token chunked", "/v1/default/entries/" + entryKey("e3"), none, -1, 401, "unauthorized"},
		{"read-only token", "/v1/default/entries/" + entryKey("e4"), tokReader, 100, 403, "forbidden"},
		{"upper-case path, other namespace", "/V1/other/ENTRIES/" + entryKey("e5") + "/", tokWriter, 100, 403, "forbidden"},
		{"over max-entry-size", "/v1/default/entries/" + entryKey("e6"), tokWriter, 8 << 20, 413, "entry_too_large"},
		{"import without token", "/v1/default/import", none, 100, 401, "unauthorized"},
		{"accepted", "/v1/default/entries/" + entryKey("e7"), tokWriter, 100, 201, ""},
		{"accepted chunked", "/v1/default/entries/" + entryKey("e8"), tokWriter, -1, 201, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			method := http.MethodPut
			if strings.HasSuffix(tc.path, "/import") {
				method = http.MethodPost
			}
			framing := fmt.Sprintf("Content-Length: %d", tc.length)
			if tc.length < 0 {
				framing = "Transfer-Encoding: chunked"
			}
			authz := ""
			if tc.tok.Secret != "" {
				authz = "Authorization: Bearer " + tc.tok.Secret + "\r\n"
			}
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\n%s%s\r\nExpect: 100-continue\r\n\r\n", method, tc.path, authz, framing)
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantStatus != 201 {
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != tc.wantStatus {
					t.Fatalf("first answer %d %s; want the final %d before any body is sent", resp.StatusCode, body, tc.wantStatus)
				}
				if got := errCode(t, body); got != tc.wantCode {
					t.Fatalf("code %q, want %q", got, tc.wantCode)
				}
				if !resp.Close {
					t.Fatalf("the answer keeps the connection open; the body the client may still send would be read as a request")
				}
				return
			}
			if resp.StatusCode != http.StatusContinue {
				t.Fatalf("first answer %d; want 100 Continue", resp.StatusCode)
			}
			if tc.length < 0 {
				fmt.Fprintf(conn, "64\r\n%s\r\n0\r\n\r\n", strings.Repeat("c", 100))
			} else {
				io.WriteString(conn, strings.Repeat("b", tc.length))
			}
			resp, err = http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d %s after 100 Continue, want %d", resp.StatusCode, body, tc.wantStatus)
			}
		})
	}
}
