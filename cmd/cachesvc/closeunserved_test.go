package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

// TestCloseUnservedDirGone closes, as a start that failed after the store
// opened does (openStores, when the shared tier does not open), a store
// whose --data was deleted meanwhile. It must return, with an error naming
// the directory. Before, it called Badger's Close, which retries its
// memtable flush into the deleted directory for good: serve hung at start
// instead of saying why it could not start.
func TestCloseUnservedDirGone(t *testing.T) {
	tests := []struct {
		name    string
		remove  bool
		wantErr string // "" for nil
	}{
		{"directory there", false, ""},
		{"directory deleted", true, "store not closed: the data directory "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			hot, err := store.Open(store.Config{Dir: data})
			if err != nil {
				t.Fatal(err)
			}
			// Something in the memtable that Close must flush.
			if _, err := hot.Put(context.Background(), store.DefaultNamespace, store.Key{1}, bytes.NewReader([]byte("exe")), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.remove {
				if err := os.RemoveAll(data); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() { done <- closeUnserved(hot) }()
			select {
			case err = <-done:
			case <-time.After(time.Minute): // a hang, not a slow close
				t.Fatal("closeUnserved did not return within a minute: it waits for Badger's Close, which never returns on a deleted directory")
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("closeUnserved: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, store.ErrDirUnavailable)):
				t.Errorf("closeUnserved: %v, want %q (store.ErrDirUnavailable)", err, tc.wantErr)
			}
		})
	}
}
