package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/store"
)

// TestServeNewerFormat starts serve on a --data directory that a newer
// cachesvc wrote (a rollback past a store format change): it exits 1
// before opening the store, naming both formats, the binary that wrote the
// directory and what to do, and leaves the directory as it was.
func TestServeNewerFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf(`{"format":%d,"written_by":"cachesvc v9.0.0"}`, store.FormatVersion+1)
	path := filepath.Join(dir, store.FormatFile)
	if err := os.WriteFile(path, []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd(t, "serve", "--addr", "127.0.0.1:0", "--data", dir, "--log-format", "text")
	for _, want := range []string{
		fmt.Sprintf("store format %d (written by cachesvc v9.0.0)", store.FormatVersion+1),
		fmt.Sprintf("reads store format %d at most", store.FormatVersion),
		"run the newer binary on it again, or give this one an empty --data directory",
	} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != marker {
		t.Errorf("marker %q after the refusal, want it untouched", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err == nil {
		t.Error("serve created a Badger MANIFEST in a directory it refused")
	}
}
