package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// withFileLimit returns a script that runs bin with the open-files limit
// (soft and hard, so that Go's runtime cannot raise it) set to n.
func withFileLimit(t *testing.T, bin string, n int) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "cachesvc-limited")
	body := fmt.Sprintf("#!/bin/sh\nulimit -n %d || exit 97\nexec %q \"$@\"\n", n, bin)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// waitServing is waitFor that also fails at once if the server exits.
func waitServing(t *testing.T, p *proc, what string, cond func() bool) {
	t.Helper()
	waitFor(t, what, func() bool {
		select {
		case <-p.exited:
			t.Fatalf("cachesvc serve exited while waiting for %s:\n%s", what, p.stderr.String())
		default:
		}
		return cond()
	})
}

// TestServeSurvivesOpenFilesLimit opens more connections than the server
// has file descriptors. Its accepts then fail (EMFILE); fasthttp returned
// that error and serve exited, so one client could take the server down.
// Now the server logs it, keeps the connections it has, and serves new ones
// once others close.
func TestServeSurvivesOpenFilesLimit(t *testing.T) {
	bin := withFileLimit(t, buildBinary(t), 256)
	p := startServer(t, bin, t.TempDir())
	addr := strings.TrimPrefix(p.url, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for i := 0; i < 400; i++ {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			break // the kernel's backlog is full: the server is past its limit
		}
		conns = append(conns, c)
	}
	waitServing(t, p, "log of the open-files limit", func() bool {
		return strings.Contains(p.stderr.String(), "open-files limit is reached")
	})
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil
	client := &http.Client{Timeout: 5 * time.Second}
	waitServing(t, p, "an answer to /healthz", func() bool {
		resp, err := client.Get(p.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
