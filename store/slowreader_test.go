package store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestSlowReaderDoesNotPinDisk opens a Get of a three-chunk entry, reads a
// byte and stalls, as a slow client does, while entries are deleted and GC
// rewrites the value log. Before, the reader held a Badger iterator for its
// whole transfer, and Badger deletes no value-log file that GC rewrote
// while any iterator is open: the directory kept every byte deleted until
// the client finished. Now a reader idle for readerIdle releases its
// transaction, the files go at once, and the stalled reader still reads its
// entry whole.
func TestSlowReaderDoesNotPinDisk(t *testing.T) {
	dir := t.TempDir()
	s := openInternal(t, Config{Dir: dir, MaxBytes: 64 * mib, ValueLogFileSize: 2 * mib, GCInterval: -1})
	defer s.Close()
	slow := pattern(7, 3*mib)
	mustPut(t, s, "default", keyOf("slow"), slow)
	const n = 12
	for i := range n {
		mustPut(t, s, "default", keyOf(fmt.Sprint(i)), pattern(byte(i), mib))
	}
	_, rc, err := s.Get(context.Background(), "default", keyOf("slow"), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	first := make([]byte, 1)
	if _, err := io.ReadFull(rc, first); err != nil {
		t.Fatal(err)
	}
	waitIdleRelease(t, rc)
	for i := range n {
		if err := s.Delete(context.Background(), "default", keyOf(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	before := vlogBytes(t, dir)
	rewrote := s.CollectGarbage()
	after := vlogBytes(t, dir)
	t.Logf("value log %d bytes before GC, %d after, with a reader stalled; %d files rewritten", before, after, rewrote)
	if rewrote == 0 || after > before/2 {
		t.Errorf("GC did not return deleted bytes while a reader stalled: %d -> %d bytes, %d files rewritten", before, after, rewrote)
	}
	rest, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(append(first, rest...), slow) {
		t.Fatalf("stalled reader after GC: %d bytes, %v", 1+len(rest), err)
	}
}

// TestReaderOfDeletedEntry deletes an entry while a reader is between its
// chunks, and runs GC. The reader, which reads its later chunks in
// transactions of their own, still reads the whole entry (the store's
// contract: a reader opened before Delete reads the whole entry): the
// purge of the chunks waits for it, and comes when it closes.
func TestReaderOfDeletedEntry(t *testing.T) {
	s := openInternal(t, Config{Dir: t.TempDir(), MaxBytes: 64 * mib, GCInterval: -1})
	defer s.Close()
	data := pattern(3, 3*mib)
	mustPut(t, s, "default", keyOf("gone"), data)
	_, rc, err := s.Get(context.Background(), "default", keyOf("gone"), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	first := make([]byte, 1)
	if _, err := io.ReadFull(rc, first); err != nil {
		t.Fatal(err)
	}
	waitIdleRelease(t, rc) // later chunks come from a transaction after the Delete
	if err := s.Delete(context.Background(), "default", keyOf("gone")); err != nil {
		t.Fatal(err)
	}
	s.CollectGarbage()
	if n := countChunks(t, s); n != 3 {
		t.Fatalf("%d chunks stored while a reader reads the deleted entry, want its 3", n)
	}
	rest, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(append(first, rest...), data) {
		t.Fatalf("reader of an entry deleted meanwhile: %d bytes, %v", 1+len(rest), err)
	}
	rc.Close()
	if n := countChunks(t, s); n != 0 {
		t.Fatalf("%d chunks left after the last reader closed, want 0", n)
	}
	if u := s.Usage(); u.IntegrityFailures != 0 || u.Entries != 0 || u.Bytes != 0 {
		t.Fatalf("Usage = %+v, want nothing stored and no integrity failure", u)
	}
}

// waitIdleRelease waits until the stalled reader rc has released its
// transaction (readerIdle after its last chunk), failing after 10 s.
func waitIdleRelease(t *testing.T, rc io.ReadCloser) {
	t.Helper()
	r := rc.(*blobReader)
	for deadline := time.Now().Add(10 * time.Second); ; {
		r.mu.Lock()
		released := r.txn == nil
		r.mu.Unlock()
		if released {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a reader idle for 10 s still holds its transaction (readerIdle is %v)", readerIdle)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
