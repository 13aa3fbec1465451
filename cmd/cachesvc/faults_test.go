package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of size at a new directory of t and unmounts it
// at cleanup; it skips the test when mounting is not permitted.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); the store-level disk-full test covers the limit", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestDiskFullTmpfs fills a real 128 MiB filesystem through the API: the
// server must answer every upload with a clean status (2xx, or 507 once the
// disk is full — never crash or 500 forever), stay up, and keep every
// acknowledged entry intact, also after a restart.
func TestDiskFullTmpfs(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	data := filepath.Join(mountTmpfs(t, "128m"), "data")
	bin := buildBinary(t)
	p := startServer(t, bin, data)
	acked := map[string]string{}
	codes := map[int]int{}
	const size = 1 << 20
	full := false
	for i := 0; i < 200 && !full; i++ {
		seed := uint64(i) + 1
		h := sha256.New()
		io.Copy(h, newGen(seed, size))
		sum := hex.EncodeToString(h.Sum(nil))
		key := fmt.Sprintf("%064x", seed)
		req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/full/entries/"+key, newGen(seed, size))
		req.ContentLength = size
		req.Header.Set("X-Content-SHA256", sum)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("upload %d: the server dropped the request: %v\n%s", i, err, p.stderr.String())
		}
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		codes[resp.StatusCode]++
		switch {
		case resp.StatusCode/100 == 2:
			acked[key] = sum
		case resp.StatusCode == http.StatusInsufficientStorage:
			if body.Error.Code != "store_full" {
				t.Errorf("507 with code %q", body.Error.Code)
			}
			full = true
		default:
			t.Errorf("upload %d: status %d code %q", i, resp.StatusCode, body.Error.Code)
			full = resp.StatusCode >= 500
		}
	}
	t.Logf("disk full after %d acknowledged 1 MiB uploads; statuses %v", len(acked), codes)
	if !full {
		t.Fatal("a 128 MiB filesystem took 200 MiB of uploads")
	}
	if len(acked) == 0 {
		t.Fatal("nothing fit: the test proves nothing")
	}
	check := func(when string) {
		for key, sum := range acked {
			status, got := getSum(t, p.url+"/v1/full/entries/"+key)
			if status != 200 || got != sum {
				t.Errorf("%s: acknowledged entry %s: GET %d sha256 %s, want 200 %s", when, key, status, got, sum)
			}
		}
	}
	// Still serving: health, reads of everything acknowledged.
	if resp, err := http.Get(p.url + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz after disk full: %v %v", resp, err)
	}
	check("while full")
	p.stop(t, 30*time.Second)
	p = startServer(t, bin, data)
	check("after restart")
	p.stop(t, 30*time.Second)
}

// TestRestartOnFullDisk kills serve, fills its disk to the last byte (as
// another process on the host would) and starts it again: it must refuse
// with exit 1 and a message that says the disk is full and what to free
// (Badger used to die of SIGBUS replaying its memtables, with a runtime
// stack trace, on every restart), and once space returns it starts with
// every acknowledged entry intact.
func TestRestartOnFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("process test skipped in -short mode")
	}
	mnt := mountTmpfs(t, "64m")
	data := filepath.Join(mnt, "data")
	bin := buildBinary(t)
	p := startServer(t, bin, data)
	acked := map[string]string{}
	for i := uint64(1); i <= 8; i++ {
		key := fmt.Sprintf("%064x", i)
		h := sha256.New()
		io.Copy(h, newGen(i, 100<<10))
		req, _ := http.NewRequest(http.MethodPut, p.url+"/v1/default/entries/"+key, newGen(i, 100<<10))
		req.ContentLength = 100 << 10
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("upload %d: %d", i, resp.StatusCode)
		}
		acked[key] = hex.EncodeToString(h.Sum(nil))
	}
	p.kill() // its memtable is replayed at the next start

	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			break // ENOSPC: the disk is full
		}
	}
	f.Close()

	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data, "--log-format", "json",
		"--wasm-cache", testWasmCache(t))
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("serve on a full disk: exit %d (%v), want 1:\n%.3000s", code, err, out)
	}
	for _, want := range []string{"bytes free and opening the store needs at least", "free space on that filesystem"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("serve on a full disk does not say %q:\n%.3000s", want, out)
		}
	}
	if strings.Contains(string(out), "SIGBUS") || strings.Contains(string(out), "goroutine ") {
		t.Errorf("serve on a full disk crashed:\n%.3000s", out)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	p = startServer(t, bin, data)
	for key, sum := range acked {
		if status, got := getSum(t, p.url+"/v1/default/entries/"+key); status != 200 || got != sum {
			t.Errorf("entry %s after space returned: GET %d sha256 %s, want 200 %s", key, status, got, sum)
		}
	}
	p.stop(t, 30*time.Second)
}
