package api_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// getOnItsOwnConn sends GET target with headers on a connection of its
// own and returns the answer's status and body. The server answers a header block
// past its limit before reading the rest, and closes: with the rest unread,
// the kernel resets the connection, and a client still writing gets EPIPE
// or ECONNRESET although the answer has arrived (net/http returns that
// write error, not the answer). The answer, queued before the reset, stays
// readable (Linux keeps it), so those two write errors are no result here;
// the answer, read after them, is. TestHeaderSizeLimit failed under load
// with net/http's "write: broken pipe" before.
func getOnItsOwnConn(t *testing.T, srv *apitest.Server, target string, headers ...string) (int, []byte) {
	t.Helper()
	c := rawConn(t, srv)
	var req bytes.Buffer
	fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", target, strings.TrimPrefix(srv.URL, "http://"))
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&req, "%s: %s\r\n", headers[i], headers[i+1])
	}
	req.WriteString("\r\n")
	// In pieces, as net/http writes through its 4 KiB buffer: the server
	// may answer and close between two of them.
	var werr error
	for b := req.Bytes(); len(b) > 0 && werr == nil; b = b[min(len(b), 1024):] {
		_, werr = c.Write(b[:min(len(b), 1024)])
	}
	if werr != nil && !errors.Is(werr, syscall.EPIPE) && !errors.Is(werr, syscall.ECONNRESET) {
		t.Fatalf("send GET %.40s: %v", target, werr)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer to GET %.40s (sending it: %v): %v", target, werr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the answer to GET %.40s (sending it: %v): %v", target, werr, err)
	}
	return resp.StatusCode, body
}

// rawConn dials the server's TCP address.
func rawConn(t *testing.T, srv *apitest.Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
