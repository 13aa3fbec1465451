package main

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFirstPutAfterWait: the burst starts when the wait returns, so a fresh
// server must take its first PUT then. Waiting for /healthz alone (200 while
// the store opens and plugins compile) made the burst's first PUTs fail
// with 503 starting, counted as failures.
func TestFirstPutAfterWait(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "cachesvc")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/cachesvc").CombinedOutput(); err != nil {
		t.Fatalf("build cachesvc: %v\n%s", err, out)
	}
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--addr", addr, "--data", filepath.Join(dir, "data"), "--log-level", "warn")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	base := "http://" + addr
	hc := &http.Client{}
	if err := waitReady(hc, base); err != nil {
		t.Fatal(err)
	}
	code, _, err := put(hc, base, []byte("first entry of the burst"))
	if err != nil || code != http.StatusCreated {
		t.Fatalf("first PUT after the wait: %d, %v; want 201", code, err)
	}
}
