package api_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestLingeringCloseSendsFIN: a body refused from its headers and too large
// to drain gets its answer with Connection: close, then a lingering close
// (half-close, discard what still arrives). The half-close never happened:
// the connection under it is wrapped for --min-transfer-rate, and that
// wrapper hid CloseWrite, so a client that sent its whole body and read to
// the end of the answer waited out the linger, itself stretched by the
// bytes discarded (2 s + 6 MiB at 64 KiB/s: 98 s). Now the client reads
// the end at once. The bound below only tells an answer from that wait.
func TestLingeringCloseSendsFIN(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{MaxEntryBytes: 1 << 20})
	const size = 6 << 20 // over the 4 MiB the server drains instead
	for _, tc := range []struct {
		name, method, path, code string
		status                   int
	}{
		{"entry over --max-entry-size", http.MethodPut, "/v1/default/entries/" + keyOf("linger"), "entry_too_large", http.StatusRequestEntityTooLarge},
		{"JSON body over its limit", http.MethodPost, "/v1/default/exists", "body_too_large", http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", tc.method, tc.path, size)
			errc := make(chan error, 1)
			go func() { _, err := io.Copy(conn, io.LimitReader(filler(' '), size)); errc <- err }()
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body := apitest.ReadAll(t, resp)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.code) || !resp.Close {
				t.Fatalf("%d %s (close %v); want %d %s and Connection: close", resp.StatusCode, body, resp.Close, tc.status, tc.code)
			}
			if err := <-errc; err != nil {
				t.Fatalf("writing the body: %v", err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			extra, err := io.ReadAll(br)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the server kept the connection open after its Connection: close answer: no FIN while it lingered")
			}
			if len(extra) > 0 {
				t.Errorf("after the answer: %q", extra)
			}
		})
	}
}
