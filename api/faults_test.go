package api_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestClientDisconnectMidDownload has many clients hang up part-way through
// GETs and batch streams of a large entry. The server must release what
// each held (store readers, in-flight counts: shutdown at cleanup waits for
// them; apitest's cleanup fails the test if Shutdown finds requests still
// running) and keep serving complete, correct bodies to everyone else.
func TestClientDisconnectMidDownload(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	const size = 8 << 20
	content := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	sum := sha256.Sum256(content)
	key := entryKey("big download")
	if resp := srv.Do("PUT", srv.EntryURL("default", key), bytes.NewReader(content)); resp.StatusCode != 201 {
		t.Fatalf("put: %d", resp.StatusCode)
	}
	addr := strings.TrimPrefix(srv.URL, "http://")
	batch := fmt.Sprintf(`{"keys":[%q]}`, key)
	requests := []string{
		fmt.Sprintf("GET /v1/default/entries/%s HTTP/1.1\r\nHost: x\r\n\r\n", key),
		fmt.Sprintf("POST /v1/default/batch HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(batch), batch),
	}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			io.WriteString(c, requests[i%len(requests)])
			// Read a little of the body, then hang up with a reset.
			if n, err := io.ReadFull(c, make([]byte, 64<<10+i*4096)); err != nil {
				t.Errorf("client %d: read %d bytes: %v", i, n, err)
			}
			c.(*net.TCPConn).SetLinger(0)
		}(i)
	}
	wg.Wait()
	for i := 0; i < 3; i++ {
		resp := srv.Do("GET", srv.EntryURL("default", key), nil)
		h := sha256.New()
		n, err := io.Copy(h, resp.Body)
		resp.Body.Close()
		if err != nil || n != size || [32]byte(h.Sum(nil)) != sum {
			t.Fatalf("GET after disconnects: %d bytes, err %v", n, err)
		}
	}
	if resp := srv.Do("GET", srv.URL+"/healthz", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %d", resp.StatusCode)
	}
}
