package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestServeDataReadOnly takes write access to the --data directory of a
// running `cachesvc serve` away (a read-only remount, or a chmod as
// another user). The process must stay up: uploads get 503
// data_dir_unavailable naming the directory, entries stored before are
// served, /readyz fails; once access is back, uploads are stored again
// without a restart and SIGTERM ends it cleanly. Before, the uploads were
// stored (201) into a memtable Badger could not replace once full, which
// then ended the process.
func TestServeDataReadOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess test skipped in -short mode")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startServer(t, bin, data)
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	entry := func(i int) string { return fmt.Sprintf("/v1/default/entries/%064x", i) }
	for i := range 20 {
		if status, body := do(http.MethodPut, entry(i), fmt.Sprint("exe ", i)); status != http.StatusCreated {
			t.Fatalf("PUT: %d %s", status, body)
		}
	}
	for status, _ := do(http.MethodGet, "/readyz", ""); status != http.StatusOK; status, _ = do(http.MethodGet, "/readyz", "") {
		time.Sleep(10 * time.Millisecond) // the built-in plugins are loading
	}

	restore := storetest.MakeReadOnly(t, data)
	gone := "the data directory " + data + " is gone or not writable"
	for i := range 500 {
		if status, body := do(http.MethodPut, entry(1000+i), "new exe"); status != http.StatusServiceUnavailable || !strings.Contains(body, "data_dir_unavailable") || !strings.Contains(body, gone) {
			t.Fatalf("PUT %d with --data read-only: %d %s, want 503 data_dir_unavailable %q", i, status, body, gone)
		}
		if status, body := do(http.MethodGet, entry(i%20), ""); status != http.StatusOK || body != fmt.Sprint("exe ", i%20) {
			t.Fatalf("GET of an entry stored before, with --data read-only: %d %s", status, body)
		}
	}
	if status, body := do(http.MethodGet, "/readyz", ""); status != http.StatusServiceUnavailable || !strings.Contains(body, gone) {
		t.Errorf("/readyz with --data read-only: %d %s, want 503 %q", status, body, gone)
	}

	restore()
	if status, body := do(http.MethodPut, entry(2000), "after"); status != http.StatusCreated {
		t.Errorf("PUT with --data writable again: %d %s, want 201", status, body)
	}
	if status, body := do(http.MethodGet, "/readyz", ""); status != http.StatusOK {
		t.Errorf("/readyz with --data writable again: %d %s, want 200", status, body)
	}
	if code, stderr := p.terminate(t, time.Minute); code != 0 {
		t.Errorf("exit code %d, want 0:\n%s", code, stderr)
	}
}
