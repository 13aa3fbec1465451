package api_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestStreamedAnswersToHTTP10AreCloseDelimited: an HTTP/1.0 client cannot
// read chunked transfer coding, so an answer of unknown length (an export,
// a run manifest) reaches it without Content-Length or Transfer-Encoding,
// its end marked by the server closing the connection (RFC 9112 section
// 6.3), and reads whole. HTTP/1.1 clients still get it chunked.
func TestStreamedAnswersToHTTP10AreCloseDelimited(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	for _, name := range []string{"one", "two"} {
		resp := srv.Do(http.MethodPut, srv.EntryURL("default", keyOf(name)), strings.NewReader("bytes of "+name))
		if b := apitest.ReadAll(t, resp); resp.StatusCode != 201 {
			t.Fatalf("put %s: %d %s", name, resp.StatusCode, b)
		}
	}
	resp := srv.Do(http.MethodGet, srv.EntryURL("default", keyOf("one")), nil, "X-Cachesvc-Run", "run-1")
	apitest.ReadAll(t, resp)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		path  string
		check func(t *testing.T, body []byte)
	}{
		{"/v1/default/export", func(t *testing.T, body []byte) {
			tr := tar.NewReader(bytes.NewReader(body))
			var names []string
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("the export is not a whole tar: %v", err)
				}
				names = append(names, h.Name)
			}
			if len(names) != 3 || names[2] != "export.json" {
				t.Fatalf("export members %v, want two entries and export.json", names)
			}
		}},
		{"/v1/default/runs/run-1/manifest", func(t *testing.T, body []byte) {
			var m struct{ Keys []json.RawMessage }
			if err := json.Unmarshal(body, &m); err != nil || len(m.Keys) != 1 {
				t.Fatalf("manifest %s: %v, want one key", body, err)
			}
		}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			for _, proto := range []string{"HTTP/1.0", "HTTP/1.1"} {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(30 * time.Second))
				io.WriteString(conn, "GET "+tc.path+" "+proto+"\r\nHost: x\r\nConnection: close\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatalf("%s: reading the body: %v", proto, err)
				}
				if resp.StatusCode != 200 {
					t.Fatalf("%s: status %d %s", proto, resp.StatusCode, body)
				}
				chunked := len(resp.TransferEncoding) > 0
				if proto == "HTTP/1.0" && (chunked || resp.ContentLength != -1 || !resp.Close) {
					t.Fatalf("HTTP/1.0: Transfer-Encoding %v, Content-Length %d, close %v; want neither, the end marked by the close",
						resp.TransferEncoding, resp.ContentLength, resp.Close)
				}
				if proto == "HTTP/1.1" && !chunked {
					t.Fatalf("HTTP/1.1: Transfer-Encoding %v, want chunked", resp.TransferEncoding)
				}
				tc.check(t, body)
			}
		})
	}
}
