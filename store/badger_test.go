package store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/storetest"
)

func openBadger(t *testing.T, dir string, lim storetest.Limits) store.Store {
	t.Helper()
	s, err := store.Open(store.Config{
		Dir:           dir,
		MaxBytes:      lim.MaxBytes,
		MaxEntryBytes: lim.MaxEntryBytes,
		Logger:        testLogger(t),
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// corruptBadger flips a byte in the middle of data's bytes in the value log.
func corruptBadger(t *testing.T, dir string, data []byte) {
	t.Helper()
	mid := len(data) / 2
	if _, err := storetest.FlipInValueLog(dir, data[mid:mid+64]); err != nil {
		t.Fatal(err)
	}
}

func TestBadgerConformance(t *testing.T) {
	storetest.Run(t, openBadger, corruptBadger)
}

// TestBadgerEviction runs the eviction suite with the disk bound a size
// limit brings by default, and without it: reservations take another path
// through each (reserve.go).
func TestBadgerEviction(t *testing.T) {
	t.Run("disk bound", func(t *testing.T) { storetest.RunEviction(t, openBadger) })
	t.Run("no disk bound", func(t *testing.T) {
		storetest.RunEviction(t, func(t *testing.T, dir string, lim storetest.Limits) store.Store {
			s, err := store.Open(store.Config{Dir: dir, MaxBytes: lim.MaxBytes, MaxEntryBytes: lim.MaxEntryBytes,
				MaxDiskBytes: -1, Logger: testLogger(t)})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s
		})
	})
}

func TestBadgerDedup(t *testing.T) {
	storetest.RunDedup(t, openBadger)
}

func TestBadgerSyncWrites(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(store.Config{Dir: dir, SyncWrites: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	data := storetest.Data(1, 3*storetest.MiB+1)
	key := storetest.KeyOf("sync")
	if _, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), store.PutOptions{Size: -1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(store.Config{Dir: dir, SyncWrites: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, rc, err := s.Get(context.Background(), "default", key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes: %v", len(got), err)
	}
}

// TestFlipInValueLog is the tamper test through the public API only, as an
// HTTP-level test would do it.
func TestFlipInValueLog(t *testing.T) {
	dir := t.TempDir()
	data := storetest.Data(5, 2*storetest.MiB)
	key := storetest.KeyOf("tampered")
	s := openBadger(t, dir, storetest.Limits{})
	if _, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), store.PutOptions{Size: -1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.FlipInValueLog(dir, data[1000:1064]); err != nil {
		t.Fatal(err)
	}
	s = openBadger(t, dir, storetest.Limits{})
	defer s.Close()
	_, rc, err := s.Get(context.Background(), "default", key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if !errors.Is(err, store.ErrCorrupt) || len(got) != 0 {
		t.Fatalf("read of a tampered first chunk: %d bytes, %v; want 0 bytes and ErrCorrupt", len(got), err)
	}
	if _, err := s.Stat(context.Background(), "default", key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Stat after detection = %v, want ErrNotFound", err)
	}
	if u := s.Usage(); u.IntegrityFailures != 1 || u.Entries != 0 {
		t.Fatalf("Usage = %+v", u)
	}
}
