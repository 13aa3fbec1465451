package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestUnwritableDirRefusesWrites takes write access to an open store's
// directory away and sends it 5,000 small uploads, with a 1 MiB memtable
// that about 2,000 of them fill. Before, the uploads were stored until
// Badger had to start the next memtable, could not create its file, and
// ended the process (log.Fatalf) at the next write, or panicked at the next
// read. Now every write is refused before Badger sees it (ErrDirUnavailable,
// naming the directory), reads of what the store held go on, the batched
// access times wait in memory, and writes resume once access is back.
//
// The directory removed (renamed away, so that it can come back) is
// refused alike; before, an upload there failed on its free-space check
// (500), while the store's own writes went on into the memtable.
func TestUnwritableDirRefusesWrites(t *testing.T) {
	tests := []struct {
		name string
		take func(t *testing.T, dir string) (restore func())
	}{
		{"read-only", func(t *testing.T, dir string) func() { return storetest.MakeReadOnly(t, dir) }},
		{"removed", func(t *testing.T, dir string) func() {
			mustRename(t, dir, dir+".away")
			return func() { mustRename(t, dir+".away", dir) }
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { testUnwritableDir(t, tc.take) })
	}
}

func testUnwritableDir(t *testing.T, take func(t *testing.T, dir string) (restore func())) {
	dir := filepath.Join(t.TempDir(), "data")
	var logs storetest.LogBuffer
	s, err := store.Open(store.Config{Dir: dir, MemTableSize: 1 << 20, FlushInterval: 10 * time.Millisecond,
		GCInterval: 10 * time.Millisecond, ExpiryInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// After the directory is back (cleanups run last first): Badger's
	// Close waits for good to flush into a directory it cannot write.
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	put := func(name string) error {
		data := []byte("executable " + name)
		_, err := s.Put(ctx, store.DefaultNamespace, dirKey(name), bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
		return err
	}
	get := func(name string) (string, error) {
		_, r, err := s.Get(ctx, store.DefaultNamespace, dirKey(name), 0, -1)
		if err != nil {
			return "", err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		return string(b), err
	}
	const before = 100
	for i := range before {
		if err := put(fmt.Sprint("before ", i)); err != nil {
			t.Fatal(err)
		}
	}

	restore := sync.OnceFunc(take(t, dir))
	t.Cleanup(restore) // should the test end early
	want := "the data directory " + dir + " is gone or not writable"
	refused := 0
	for i := range 5000 {
		err := put(fmt.Sprint("after ", i))
		switch {
		case err == nil:
		case errors.Is(err, store.ErrDirUnavailable) && strings.Contains(err.Error(), want):
			refused++
		default:
			t.Fatalf("put %d into an unwritable directory: %v, want ErrDirUnavailable %q", i, err, want)
		}
		name := fmt.Sprint("before ", i%before)
		if got, err := get(name); err != nil || got != "executable "+name {
			t.Fatalf("get %q with the directory unwritable: %q, %v", name, got, err)
		}
	}
	if refused != 5000 {
		t.Errorf("%d of 5000 puts into an unwritable directory refused, want all", refused)
	}
	if err := s.Delete(ctx, store.DefaultNamespace, dirKey("before 0")); !errors.Is(err, store.ErrDirUnavailable) {
		t.Errorf("delete with the directory unwritable: %v, want ErrDirUnavailable", err)
	}
	s.CollectGarbage()
	time.Sleep(100 * time.Millisecond) // flushes, GC and expiry passes: each skips
	if m, err := s.Stat(ctx, store.DefaultNamespace, dirKey("before 1")); err != nil || m.Hits == 0 {
		t.Errorf("hits of an entry read with the directory unwritable: %v %v, want counted", m.Hits, err)
	}
	if n := strings.Count(logs.String(), "skipped while the data directory"); n == 0 || n > 4 {
		t.Errorf("%d lines about skipped background writes, want one per kind:\n%s", n, logs.String())
	}

	restore()
	if err := put("back"); err != nil {
		t.Fatalf("put with the directory writable again: %v", err)
	}
	if got, err := get("back"); err != nil || got != "executable back" {
		t.Errorf("get after writes resumed: %q %v", got, err)
	}
	if err := s.Delete(ctx, store.DefaultNamespace, dirKey("before 0")); err != nil {
		t.Errorf("delete with the directory writable again: %v", err)
	}
	if strings.Contains(logs.String(), "error flushing memtable") {
		t.Errorf("Badger failed a memtable flush:\n%s", logs.String())
	}
}

func dirKey(name string) store.Key { return store.Key(sha256.Sum256([]byte(name))) }

// BenchmarkDirErr is the cost of the look at the directory that every
// write makes first (a stat and an access(2)); compare BenchmarkPut/4KiB.
func BenchmarkDirErr(b *testing.B) {
	s := openBench(b, store.Config{GCInterval: -1})
	for b.Loop() {
		if err := s.DirErr(); err != nil {
			b.Fatal(err)
		}
	}
}
