package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// hammerContents are the bodies writers use: key k always gets
// hammerContents[k%6], so 12 keys share 6 contents (dedup).
var hammerContents = func() [][]byte {
	var cs [][]byte
	for i, n := range []int{0, 1, 4 << 10, 200 << 10, mib, 3 * mib / 2} {
		cs = append(cs, pattern(byte(100+i), n))
	}
	return cs
}()

// checkConsistent verifies that accounting, metadata, blob records and
// chunks agree.
func checkConsistent(t *testing.T, s *Badger) {
	t.Helper()
	var metas []Meta
	if err := s.Walk(context.Background(), "", func(m Meta) bool { metas = append(metas, m); return true }); err != nil {
		t.Fatal(err)
	}
	blobs := map[[32]byte]int64{}
	for _, m := range metas {
		blobs[m.SHA256] = m.Size
	}
	var bytesWant int64
	for _, n := range blobs {
		bytesWant += n
	}
	u := s.Usage()
	if u.Entries != int64(len(metas)) || u.Blobs != int64(len(blobs)) || u.Bytes != bytesWant {
		t.Fatalf("Usage %+v, but walk finds %d entries, %d blobs, %d bytes", u, len(metas), len(blobs), bytesWant)
	}
	if u.MaxBytes > 0 && u.Bytes > u.MaxBytes {
		t.Fatalf("Usage %+v over the limit", u)
	}
	records, chunks := 0, 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixBlob), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			records++
			if err := it.Item().Value(func(v []byte) error {
				rec, err := decodeBlob(v)
				chunks += int(rec.chunks())
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if records != len(blobs) {
		t.Fatalf("%d blob records for %d blobs in use", records, len(blobs))
	}
	if got := countChunks(t, s); got != chunks {
		t.Fatalf("%d chunks stored, blobs name %d", got, chunks)
	}
	for _, m := range metas {
		got, err := readAll(s, m.Namespace, m.Key, 0)
		if err != nil || sha256.Sum256(got) != m.SHA256 {
			t.Fatalf("entry %s/%s: %v", m.Namespace, m.Key, err)
		}
	}
}

func TestHammer(t *testing.T) {
	dir := t.TempDir()
	// Small value-log files, so that GC rewrites files while readers read.
	s := openInternal(t, Config{Dir: dir, MaxBytes: 5 * mib, GCInterval: -1, ValueLogFileSize: 2 * mib})
	const workers, ops, keys = 8, 40, 12
	key := func(k int) Key { return keyOf(fmt.Sprint("hammer-", k)) }
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; i < ops; i++ {
				k := rng.IntN(keys)
				data := hammerContents[k%len(hammerContents)]
				ns := []string{"default", "other"}[k%2]
				switch op := rng.IntN(10); {
				case op < 4:
					opts := PutOptions{Size: int64(len(data))}
					if rng.IntN(2) == 0 {
						sum := sha256.Sum256(data)
						opts.SHA256 = &sum
					}
					_, err := s.Put(context.Background(), ns, key(k), bytes.NewReader(data), opts)
					if err != nil && !errors.Is(err, ErrFull) {
						t.Errorf("Put: %v", err)
					}
				case op < 8:
					off := int64(0)
					if len(data) > 0 {
						off = rng.Int64N(int64(len(data)))
					}
					got, err := readAll(s, ns, key(k), off)
					if err != nil && !errors.Is(err, ErrNotFound) {
						t.Errorf("Get: %v", err)
					} else if err == nil && !bytes.Equal(got, data[off:]) {
						t.Errorf("Get %d from %d: wrong bytes", k, off)
					}
				case op < 9:
					if err := s.Delete(context.Background(), ns, key(k)); err != nil && !errors.Is(err, ErrNotFound) {
						t.Errorf("Delete: %v", err)
					}
				default:
					if err := s.Walk(context.Background(), "", func(Meta) bool { return true }); err != nil {
						t.Errorf("Walk: %v", err)
					}
				}
			}
		}()
	}
	stop := make(chan struct{})
	var rewrites atomic.Int64
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { // maintenance runs throughout
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			rewrites.Add(int64(s.CollectGarbage()))
			if s.enterWrite() == nil {
				if err := s.flushAccess(); err != nil {
					t.Errorf("flush: %v", err)
				}
				s.leaveWrite()
			}
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("value-log GC rewrote %d files during the run", rewrites.Load())
	if u := s.Usage(); u.IntegrityFailures != 0 {
		t.Fatalf("integrity failures under load: %+v", u)
	}
	checkConsistent(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openInternal(t, Config{Dir: dir, MaxBytes: 5 * mib, GCInterval: -1})
	defer s.Close()
	if s.orphanChunks != 0 {
		t.Fatalf("%d orphan chunks after a clean close", s.orphanChunks)
	}
	checkConsistent(t, s)
}
