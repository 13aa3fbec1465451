package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// stalledServer listens on loopback and answers every request with head
// and then nothing, holding the connection open until the test ends: a
// server that hangs mid-answer, so that a command waits until it is
// interrupted. requests counts the requests it has read.
func stalledServer(t *testing.T, head []byte) (url string, requests *atomic.Int64) {
	t.Helper()
	requests = new(atomic.Int64)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				if _, err := c.Read(buf); err != nil { // the request head
					return
				}
				requests.Add(1)
				if _, err := c.Write(head); err != nil {
					return
				}
				<-done
			}()
		}
	}()
	return "http://" + ln.Addr().String(), requests
}

// partialExport is the head of an export answer: a tar member of 1 MiB of
// which only the first 4 KiB arrive.
func partialExport(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: "entries/" + strings.Repeat("a", 64), Mode: 0o644, Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	body := b.Bytes()
	return fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(body), body)
}

// TestInterruptedCommandsExit128PlusSignal runs client commands as
// processes against a server that stops answering, interrupts them, and
// checks the Unix convention: 130 after SIGINT, 143 after SIGTERM, so a
// script tells an interrupt from a failure (1). What a command cleans up
// is still cleaned up: an interrupted export leaves neither its file nor
// its partial file. The agent watching a directory is a daemon, like
// serve: a stop it was asked for is its success (0).
func TestInterruptedCommandsExit128PlusSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	bin := buildBinary(t)
	hang, hung := stalledServer(t, nil)
	exportDir := t.TempDir()
	export, exported := stalledServer(t, partialExport(t))
	// A command is signalled once it waits (on the server, or between
	// polls): a signal before main handles them would kill it instead.
	requested := func(n *atomic.Int64) func(string) bool {
		before := n.Load()
		return func(string) bool { return n.Load() > before }
	}
	watching := func(stderr string) bool { return strings.Contains(stderr, `msg="agent watching"`) }
	tests := []struct {
		name    string
		args    []string
		waiting func() func(stderr string) bool
		sig     syscall.Signal
		want    int
		check   func(t *testing.T)
	}{
		{"stats SIGINT", []string{"stats", "--url", hang}, func() func(string) bool { return requested(hung) }, syscall.SIGINT, 130, nil},
		{"stats SIGTERM", []string{"stats", "--url", hang}, func() func(string) bool { return requested(hung) }, syscall.SIGTERM, 143, nil},
		{"warm SIGINT", []string{"warm", "--url", hang, "--run", "r1", "--jax-cache-dir", filepath.Join(t.TempDir(), "jax")},
			func() func(string) bool { return requested(hung) }, syscall.SIGINT, 130, nil},
		{"admin export SIGINT", []string{"admin", "export", "--url", hang, "--token", "t", "--namespace", "team-a", "--out", filepath.Join(exportDir, "a.tar")},
			func() func(string) bool { return requested(hung) }, syscall.SIGINT, 130, nil},
		{"admin export mid-stream SIGTERM", []string{"admin", "export", "--url", export, "--token", "t", "--namespace", "team-a", "--out", filepath.Join(exportDir, "b.tar")},
			func() func(string) bool { return requested(exported) }, syscall.SIGTERM, 143,
			func(t *testing.T) {
				left, _ := filepath.Glob(filepath.Join(exportDir, "b.tar*"))
				if len(left) != 0 {
					t.Errorf("an interrupted export left %v", left)
				}
			}},
		{"agent --once SIGINT", []string{"agent", "--url", hang, "--once", "--interval", "1m", "--jax-cache-dir", t.TempDir()},
			func() func(string) bool { return watching }, syscall.SIGINT, 130, nil},
		{"agent watching SIGTERM", []string{"agent", "--url", hang, "--interval", "10ms", "--jax-cache-dir", t.TempDir()},
			func() func(string) bool { return watching }, syscall.SIGTERM, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Env = append(os.Environ(), "CACHESVC_TOKEN=", "CACHESVC_URL=")
			var stderr syncBuffer
			cmd.Stderr = &stderr
			waiting := tc.waiting()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			for deadline := time.Now().Add(30 * time.Second); !waiting(stderr.String()); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("the command never waited; stderr:\n%s", stderr.String())
				}
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				var ee *exec.ExitError
				code := 0
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				}
				if code != tc.want {
					t.Errorf("exit %d after %s, want %d; stderr:\n%s", code, tc.sig, tc.want, stderr.String())
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("no exit 30s after %s; stderr:\n%s", tc.sig, stderr.String())
			}
			if tc.check != nil {
				tc.check(t)
			}
			if want := "by " + signalName(tc.sig); tc.want != 0 && !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr does not say the command was interrupted %s:\n%s", want, stderr.String())
			}
		})
	}
}
