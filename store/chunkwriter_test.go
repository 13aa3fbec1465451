package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// failingChunkCommits makes commit number fail (0-based, counted over the
// store's chunk commits) fail with errCommit. Its failure is delivered
// asynchronously, and only once the next chunk's commit has been handed to
// Badger or the body has been read to its end, so the upload has read or
// handed over more when it learns of it. Every other commit is Badger's.
type failingChunkCommits struct {
	fail int

	mu      sync.Mutex
	calls   int
	eof     bool   // the body has been read to its end
	pending func() // delivers the held failure
}

var errCommit = errors.New("injected chunk commit failure")

func (f *failingChunkCommits) commit(txn *badger.Txn, done func(error)) {
	f.mu.Lock()
	n := f.calls
	f.calls++
	deliver := f.pending
	f.pending = nil
	if n == f.fail {
		fail := func() {
			txn.Discard()
			done(errCommit)
		}
		if f.eof {
			deliver = fail // nothing more is coming
		} else {
			f.pending = fail
		}
	}
	f.mu.Unlock()
	if deliver != nil {
		go deliver()
	}
	if n != f.fail {
		txn.CommitWith(done)
	}
}

// flush records that the body is read to its end and delivers a held
// failure, which no later chunk will.
func (f *failingChunkCommits) flush() {
	f.mu.Lock()
	f.eof = true
	deliver := f.pending
	f.pending = nil
	f.mu.Unlock()
	if deliver != nil {
		go deliver()
	}
}

// TestChunkCommitFailsInFlight fails one chunk commit of a multi-chunk
// upload while later chunks are in flight (Badger gives no way to make a
// commit fail, so the store's commit function is replaced). The Put must
// fail naming the write, leave nothing visible (no entry, no chunk, no
// bytes counted), release its reservation and buffers, and leave the store
// usable: a Put of the same key afterwards stores and reads back, and two
// uploads that together fill the store are both kept, which a leaked
// reservation would prevent.
func TestChunkCommitFailsInFlight(t *testing.T) {
	const (
		chunk  = 64 << 10
		chunks = 6
		size   = chunks*chunk - 100 // the last chunk is short
	)
	tests := []struct {
		name string
		fail int // which chunk commit fails
	}{
		{"first chunk", 0},
		{"middle chunk", 2},
		{"chunk before the last", chunks - 2},
		{"last chunk", chunks - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openInternal(t, Config{Dir: t.TempDir(), ChunkSize: chunk, MaxBytes: 2*size + chunk})
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			f := &failingChunkCommits{fail: tt.fail}
			s.commitChunk = f.commit
			ctx := context.Background()
			key := keyOf("failing " + tt.name)
			data := pattern(7, size)

			r := &flushAtEOF{r: bytes.NewReader(data), flush: f.flush}
			_, err := s.Put(ctx, "ns", key, r, PutOptions{})
			if !errors.Is(err, errCommit) || !strings.Contains(err.Error(), "write chunk") {
				t.Fatalf("Put = %v, want the injected failure of a chunk write", err)
			}
			if _, err := s.Stat(ctx, "ns", key); !errors.Is(err, ErrNotFound) {
				t.Errorf("Stat after the failed Put = %v, want ErrNotFound", err)
			}
			if n := countChunks(t, s); n != 0 {
				t.Errorf("%d chunks left after the failed Put, want 0", n)
			}
			if u := s.Usage(); u.Entries != 0 || u.Bytes != 0 || u.Blobs != 0 {
				t.Errorf("usage after the failed Put = %+v, want nothing counted", u)
			}

			s.commitChunk = nil // Badger's own commits from here on
			if _, err := s.Put(ctx, "ns", key, bytes.NewReader(data), PutOptions{}); err != nil {
				t.Fatalf("Put after the failure: %v", err)
			}
			other := keyOf("other " + tt.name)
			if _, err := s.Put(ctx, "ns", other, bytes.NewReader(pattern(9, size)), PutOptions{}); err != nil {
				t.Fatalf("second Put after the failure: %v", err)
			}
			for _, k := range []Key{key, other} {
				if _, err := s.Stat(ctx, "ns", k); err != nil {
					t.Errorf("Stat %s = %v: a reservation leaked by the failed Put evicted it", k, err)
				}
			}
			_, rc, err := s.Get(ctx, "ns", key, 0, -1)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("Get read %d bytes, err %v; want the %d bytes put", len(got), err, len(data))
			}
		})
	}
}

// flushAtEOF reads r and calls flush once r is exhausted, so that a failure
// held for a later chunk that never comes is delivered.
type flushAtEOF struct {
	r     io.Reader
	flush func()
}

func (f *flushAtEOF) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		f.flush()
	}
	return n, err
}
