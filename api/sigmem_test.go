package api_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/keying"
)

// TestSignatureMemoryBounded: keys and lookup read a signature whole, up to
// --max-signature-size, and nothing bounded them all together: 24
// anonymous gzip bodies of 70 KB at once took the server from 1.6 to
// 2.9 GB, and a Content-Length of 64 MiB alone reserved 64 MiB before a
// byte arrived. Now the signatures being read and keyed share 4 times the
// limit; past it a request gets 503 too_many_signatures with Retry-After
// (the clients retry it), and the room comes back as they end.
func TestSignatureMemoryBounded(t *testing.T) {
	const limit = 1 << 20 // room for 4
	srv := digestServer(t, keying.Config{MaxSignatureBytes: limit}, nil)
	addr := strings.TrimPrefix(srv.URL, "http://")
	memory := func() float64 {
		return metricSums(t, srv.URL, "cachesvc_signature_memory_bytes")["cachesvc_signature_memory_bytes"]
	}
	// Four signatures of the limit, each stalled after 600 KiB: each
	// holds 1 MiB while its client is still sending.
	var stalled []net.Conn
	for _, path := range []string{"/v1/default/keys", "/v1/default/lookup", "/v1/default/keys", "/v1/default/lookup"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{\"backend\":\"passthrough\",\"pad\":\"%s", path, limit, strings.Repeat("p", 600<<10))
		stalled = append(stalled, conn)
	}
	// Poll until the four are read (not a timing assertion: the status
	// below decides; without the bound this waits the full 10 s).
	for deadline := time.Now().Add(10 * time.Second); memory() < 4*limit && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_sigmem-1"}`)
	for _, path := range []string{"/v1/default/keys", "/v1/default/lookup"} {
		resp, body := post(t, srv, path, sig)
		if resp.StatusCode != 503 || !strings.Contains(string(body), `"too_many_signatures"`) || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("%s while 4 MiB of signatures are held: %d %s (Retry-After %q); want 503 too_many_signatures, Retry-After 1",
				path, resp.StatusCode, body, resp.Header.Get("Retry-After"))
		}
	}
	for _, conn := range stalled {
		conn.Close()
	}
	for deadline := time.Now().Add(10 * time.Second); memory() != 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if got := memory(); got != 0 {
		t.Fatalf("cachesvc_signature_memory_bytes = %v after the stalled requests ended, want 0", got)
	}
	if resp, body := post(t, srv, "/v1/default/keys", sig); resp.StatusCode != 200 {
		t.Errorf("keys once the room is back: %d %s", resp.StatusCode, body)
	}
}
