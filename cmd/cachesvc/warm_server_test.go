package main

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
)

// stallingProxy forwards TCP connections to target until `after` bytes have
// come back from it in all, then stops forwarding in both directions while
// holding every connection open: a server that hangs mid-answer (stopped,
// or its disk stalled), as the client sees it.
func stallingProxy(t *testing.T, target string, after int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		left  = after
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go io.Copy(s, c)
			go func() {
				buf := make([]byte, 4096)
				for {
					n, err := s.Read(buf)
					mu.Lock()
					n = int(min(int64(n), left))
					left -= int64(n)
					mu.Unlock()
					if n > 0 {
						c.Write(buf[:n])
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestWarmGivesUpOnHungServer: a server that stops answering mid-batch
// ends warm with an error naming the stall, instead of a warm (and the job
// start waiting on it) that never returns.
func TestWarmGivesUpOnHungServer(t *testing.T) {
	srv := keyedServer(t)
	src := t.TempDir()
	for i := 0; i < 4; i++ {
		noise := make([]byte, 20_000) // incompressible: the batch is far longer than the proxy lets through
		rand.Read(noise)
		os.WriteFile(filepath.Join(src, jaxName(i)+"-cache"), jaxFile(hex.EncodeToString(noise)), 0o644)
	}
	if code, out, errOut := runCmd(t, "agent", "--url", srv.URL, "--jax-cache-dir", src, "--run", "hang", "--once", "--interval", "20ms"); code != 0 {
		t.Fatalf("agent: exit %d\n%s\n%s", code, out, errOut)
	}
	// Save the run's manifest, so that the warm through the proxy sends
	// one batch request and hangs in the middle of its answer.
	resp, err := http.Get(srv.URL + "/v1/default/runs/hang/manifest")
	if err != nil {
		t.Fatal(err)
	}
	m, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("manifest: %d %v", resp.StatusCode, err)
	}
	mf := filepath.Join(t.TempDir(), "manifest.json")
	os.WriteFile(mf, m, 0o644)
	hung := stallingProxy(t, strings.TrimPrefix(srv.URL, "http://"), 2000)
	code, out, errOut := runCmd(t, "warm", "--url", hung, "--manifest", mf, "--jax-cache-dir", t.TempDir(), "--stall-timeout", "300ms")
	if code != 1 || !strings.Contains(errOut, "the server stalled") || !strings.Contains(errOut, "300ms") {
		t.Fatalf("warm from a hung server: exit %d, stderr %q (stdout %q); want exit 1 and the stall named", code, errOut, out)
	}
}

// TestClientCommandsSayHowToTrustTheServersCA: a server whose --tls-cert
// is signed by a private CA fails the client commands with the way to trust
// it, not only x509's "certificate signed by unknown authority".
func TestClientCommandsSayHowToTrustTheServersCA(t *testing.T) {
	pki := authtest.NewPKI(t)
	tlsCfg, err := auth.TLSFiles{Cert: pki.ServerCert, Key: pki.ServerKey}.Config()
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.TLS = tlsCfg }})
	url := "https://" + strings.TrimPrefix(srv.URL, "http://")
	for _, args := range [][]string{
		{"warm", "--url", url, "--run", "r", "--jax-cache-dir", t.TempDir()},
		{"stats", "--url", url},
		{"admin", "list", "--url", url},
	} {
		code, out, errOut := runCmd(t, args...)
		if code != 1 || !strings.Contains(errOut, "unknown authority") || !strings.Contains(errOut, "SSL_CERT_FILE=ca.pem") {
			t.Errorf("%s: exit %d, stderr %q (stdout %q); want exit 1 and how to trust the CA", args[0], code, errOut, out)
		}
	}
}
