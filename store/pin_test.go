package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

func TestAccountingPins(t *testing.T) {
	now := time.Now()
	a := newAccounting(0)
	ref := entryRef{"default", keyOf("a")}
	a.add(ref, [32]byte{1}, 100, now)
	if a.pin([32]byte{9}) != nil {
		t.Fatal("pinned a blob that is not stored")
	}
	tok := a.pin([32]byte{1})
	if tok == nil {
		t.Fatal("pin of a stored blob failed")
	}
	if _, lastRef, _ := a.lookup(ref); lastRef {
		t.Fatal("lookup says removing the entry frees a pinned blob")
	}
	if _, freed, _ := a.remove(ref); freed {
		t.Fatal("removing the last entry freed a pinned blob")
	}
	if u := a.usage(); u.Blobs != 1 || u.Bytes != 100 {
		t.Fatalf("usage with a pinned unused blob = %+v", u)
	}
	if !a.unpin([32]byte{1}, tok) {
		t.Fatal("unpin of an unused blob did not free it")
	}
	if u := a.usage(); u.Blobs != 0 || u.Bytes != 0 {
		t.Fatalf("usage after unpin = %+v", u)
	}
	// A token from before the blob was dropped and stored again is stale.
	a.add(ref, [32]byte{1}, 100, now)
	stale := a.pin([32]byte{1})
	a.remove(ref)
	a.dropBlob([32]byte{1})
	a.add(ref, [32]byte{1}, 100, now)
	if a.unpin([32]byte{1}, stale) || pinsOf(a, [32]byte{1}) != 0 {
		t.Fatal("stale token changed the new blob")
	}
}

// gateReader returns its data once release is closed.
type gateReader struct {
	r       io.Reader
	once    sync.Once
	started chan struct{}
	release chan struct{}
	err     error
}

func (g *gateReader) Read(p []byte) (int, error) {
	g.once.Do(func() {
		close(g.started)
		<-g.release
	})
	if g.err != nil {
		return 0, g.err
	}
	return g.r.Read(p)
}

func newGate(data []byte, err error) *gateReader {
	return &gateReader{r: bytes.NewReader(data), started: make(chan struct{}), release: make(chan struct{}), err: err}
}

func TestPutOfKnownContentWritesNothing(t *testing.T) {
	const size = 2*mib + 10
	s := openInternal(t, Config{Dir: t.TempDir(), MaxBytes: size + 1000})
	defer s.Close()
	data := pattern(7, size)
	sum := sha256.Sum256(data)
	mustPut(t, s, "default", keyOf("a"), data)
	chunks := countChunks(t, s)
	res, err := s.Put(context.Background(), "other", keyOf("b"), bytes.NewReader(data), PutOptions{Size: size, SHA256: &sum})
	if err != nil || !res.Created {
		t.Fatalf("Put of known content under a new key: %+v, %v", res, err)
	}
	if got := countChunks(t, s); got != chunks {
		t.Fatalf("chunks %d -> %d: known content was written again", chunks, got)
	}
	if u := s.Usage(); u.Evictions != 0 || u.Entries != 2 || u.Blobs != 1 {
		t.Fatalf("Usage = %+v: want 2 entries sharing 1 blob and no eviction in a full store", u)
	}
	if got, err := readAll(s, "other", keyOf("b"), 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %v", err)
	}
	// A body that does not match its declared digest stores nothing.
	bad := append([]byte(nil), data...)
	bad[5] ^= 1
	_, err = s.Put(context.Background(), "other", keyOf("c"), bytes.NewReader(bad), PutOptions{Size: size, SHA256: &sum})
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("mismatching body: %v", err)
	}
	if u := s.Usage(); u.Entries != 2 {
		t.Fatalf("Usage = %+v", u)
	}
}

func TestPinnedBlobOutlivesItsLastEntry(t *testing.T) {
	tests := []struct {
		name    string
		bodyErr error // the pinned upload fails with this
	}{
		{"upload completes", nil},
		{"upload fails", errors.New("client went away")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openInternal(t, Config{Dir: t.TempDir()})
			defer s.Close()
			data := pattern(8, mib+3)
			sum := sha256.Sum256(data)
			mustPut(t, s, "default", keyOf("a"), data)
			gate := newGate(data, tc.bodyErr)
			done := make(chan error, 1)
			go func() {
				_, err := s.Put(context.Background(), "default", keyOf("b"), gate, PutOptions{Size: -1, SHA256: &sum})
				done <- err
			}()
			<-gate.started // b's upload has pinned the blob
			if err := s.Delete(context.Background(), "default", keyOf("a")); err != nil {
				t.Fatal(err)
			}
			if u := s.Usage(); u.Blobs != 1 || u.Entries != 0 {
				t.Fatalf("Usage while pinned = %+v, want the blob kept", u)
			}
			close(gate.release)
			err := <-done
			if tc.bodyErr != nil {
				if !errors.Is(err, tc.bodyErr) {
					t.Fatalf("Put = %v, want the body's error", err)
				}
				if u := s.Usage(); u.Blobs != 0 || u.Bytes != 0 {
					t.Fatalf("Usage after the failed upload = %+v, want the blob freed", u)
				}
				if n := countChunks(t, s); n != 0 {
					t.Fatalf("%d chunks left after the blob was freed", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, err := readAll(s, "default", keyOf("b"), 0); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read b: %v", err)
			}
		})
	}
}

func TestQuarantineDuringPinnedUpload(t *testing.T) {
	s := openInternal(t, Config{Dir: t.TempDir()})
	defer s.Close()
	data := pattern(9, 2*mib)
	sum := sha256.Sum256(data)
	mustPut(t, s, "default", keyOf("a"), data)
	_, u := blobOf(t, s, "default", keyOf("a"))
	gate := newGate(data, nil)
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(context.Background(), "default", keyOf("b"), gate, PutOptions{Size: -1, SHA256: &sum})
		done <- err
	}()
	<-gate.started
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(chunkKey(u, 0), []byte("junk")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(s, "default", keyOf("a"), 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of the damaged entry: %v", err)
	}
	close(gate.release)
	if err := <-done; err == nil {
		t.Fatal("an upload referencing quarantined content succeeded")
	}
	if u := s.Usage(); u.Entries != 0 || u.Blobs != 0 || u.IntegrityFailures != 1 {
		t.Fatalf("Usage = %+v", u)
	}
	// Uploading the content again stores a fresh copy.
	mustPut(t, s, "default", keyOf("b"), data)
	if got, err := readAll(s, "default", keyOf("b"), 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fresh copy: %v", err)
	}
}

// pinsOf returns the pins on a stored blob (none when inline or absent).
func pinsOf(a *accounting, sha [32]byte) int {
	_, pins, _ := a.blobRefs(sha)
	return pins
}
