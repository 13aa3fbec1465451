package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

// TestSharedBlobUnpinnedWhenDirBreaks sends a Put whose declared SHA-256
// names a stored blob (so it pins that blob instead of staging bytes) and
// takes the directory away while it reads the body, so that its commit is
// refused. Once the directory is back and the blob's only entry is
// deleted, the blob must be freed. Before, the pin's release needed a write
// and was skipped while the directory was unwritable, so the blob stayed
// pinned until restart: its entry's delete freed nothing, and its bytes
// counted against --max-size for good.
func TestSharedBlobUnpinnedWhenDirBreaks(t *testing.T) {
	tests := []struct {
		name string
		// when the Put fails: at its commit (the directory goes while
		// the body is read), or before it pins (already gone).
		during bool
	}{
		{"broken during the body", true},
		{"broken before the put", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			s, err := store.Open(store.Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			ctx := context.Background()
			data := []byte("one executable, two keys")
			sum := sha256.Sum256(data)
			opts := store.PutOptions{Size: int64(len(data)), SHA256: &sum}
			if _, err := s.Put(ctx, store.DefaultNamespace, dirKey("a"), bytes.NewReader(data), opts); err != nil {
				t.Fatal(err)
			}
			// Back before Close (cleanups run last first): Badger's
			// Close waits for good on a directory it cannot write.
			t.Cleanup(func() {
				if _, err := os.Stat(dir + ".away"); err == nil {
					mustRename(t, dir+".away", dir)
				}
			})
			away := func() {
				mustRename(t, dir, dir+".away")
				// A look that found the directory writable stands for
				// a millisecond (writable): let the one the Put made
				// before its body run out, so that its commit looks.
				time.Sleep(2 * time.Millisecond)
			}
			var body io.Reader = bytes.NewReader(data)
			if tc.during {
				body = &onFirstRead{r: body, fn: away}
			} else {
				away()
			}
			_, err = s.Put(ctx, store.DefaultNamespace, dirKey("b"), body, opts)
			if !errors.Is(err, store.ErrDirUnavailable) {
				t.Fatalf("Put with the directory taken away: %v, want ErrDirUnavailable", err)
			}
			mustRename(t, dir+".away", dir)
			if err := s.Delete(ctx, store.DefaultNamespace, dirKey("a")); err != nil {
				t.Fatal(err)
			}
			if u := s.Usage(); u.Entries != 0 || u.Blobs != 0 || u.Bytes != 0 {
				t.Errorf("usage after deleting the blob's only entry: %d entries, %d blobs, %d bytes, want none: the failed Put left the blob pinned", u.Entries, u.Blobs, u.Bytes)
			}
		})
	}
}

// onFirstRead calls fn before its first Read of r.
type onFirstRead struct {
	r    io.Reader
	fn   func()
	done bool
}

func (o *onFirstRead) Read(p []byte) (int, error) {
	if !o.done {
		o.done = true
		o.fn()
	}
	return o.r.Read(p)
}
