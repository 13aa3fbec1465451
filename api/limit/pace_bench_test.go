package limit

import (
	"io"
	"testing"
	"time"
)

// BenchmarkPaceConnKeepAlive is one small keep-alive request over loopback
// TCP as the HTTP server paces it: an idle phase, a header phase, the
// request's read, a write phase and a 4 KiB response.
func BenchmarkPaceConnKeepAlive(b *testing.B) {
	srv, cli := pacePair(b, 64<<10)
	req, resp := []byte("GET /x HTTP/1.1\r\n\r\n"), make([]byte, 4096)
	buf, got := make([]byte, len(req)), make([]byte, len(resp))
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := io.ReadFull(cli, got); err != nil {
				done <- err
				return
			}
			if _, err := cli.Write(req); err != nil {
				done <- err
				return
			}
		}
	}()
	if _, err := cli.Write(req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		srv.SetReadDeadline(time.Now().Add(2 * time.Minute))
		srv.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(srv, buf); err != nil {
			b.Fatal(err)
		}
		srv.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := srv.Write(resp); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cli.Close()
	<-done
}
