package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/store"
)

// TestServeDataInUse starts serve on a --data directory whose store is
// already open (as by a first serve still running): it exits 1 saying what
// holds the directory and what to do, not only Badger's lock message.
func TestServeDataInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	code, _, errOut := runCmd(t, "serve", "--addr", "127.0.0.1:0", "--data", dir, "--log-format", "text")
	want := "another process, most likely a cachesvc serve, is using --data " + dir + ": stop it first, or give this server its own --data directory"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Fatalf("exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}
}
