package main

import (
	"bufio"
	"fmt"
	"io"
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
// once others close. (--max-conns -1: the default bound would refuse the
// connections before the descriptors ran out.)
func TestServeSurvivesOpenFilesLimit(t *testing.T) {
	bin := withFileLimit(t, buildBinary(t), 256)
	p := startServer(t, bin, t.TempDir(), "--max-conns", "-1")
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

// TestServeDefaultMaxConns: by default the server keeps descriptors for
// its store below the open-files limit, so a client opening more
// connections than that gets 503 too_many_connections, the server never
// runs out of descriptors, and it serves again once they close.
func TestServeDefaultMaxConns(t *testing.T) {
	bin := withFileLimit(t, buildBinary(t), 256) // default bound: 64
	p := startServer(t, bin, t.TempDir())
	addr := strings.TrimPrefix(p.url, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	ok, refused := 0, 0
	for i := 0; i < 200; i++ {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		switch {
		case resp.StatusCode == 200:
			ok++
			conns = append(conns, c) // held open, idle
		case resp.StatusCode == 503 && strings.Contains(string(body), "too_many_connections"):
			refused++
			_ = c.Close()
		default:
			t.Fatalf("connection %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if ok != 64 || refused != 136 {
		t.Errorf("200 connections under ulimit -n 256: %d served, %d refused; want 64 and 136", ok, refused)
	}
	if strings.Contains(p.stderr.String(), "too many open files") {
		t.Errorf("the server ran out of descriptors:\n%s", p.stderr.String())
	}
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil
	client := &http.Client{Timeout: 5 * time.Second}
	waitServing(t, p, "a ready server", func() bool {
		resp, err := client.Get(p.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
