package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

const mib = 1 << 20

// pattern returns n bytes that are unique at every 8-byte boundary, so a
// window of them can be found in a value-log file.
func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := uint64(i) | uint64(seed)<<56
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func quietLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func openInternal(t *testing.T, cfg Config) *Badger {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger(t)
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func keyOf(name string) Key { return Key(sha256.Sum256([]byte(name))) }

func mustPut(t *testing.T, s *Badger, ns string, key Key, data []byte) {
	t.Helper()
	if _, err := s.Put(context.Background(), ns, key, bytes.NewReader(data), PutOptions{Size: int64(len(data))}); err != nil {
		t.Fatalf("Put: %v", err)
	}
}

// readAll reads the whole entry, returning the read error.
func readAll(s *Badger, ns string, key Key, off int64) ([]byte, error) {
	_, rc, err := s.Get(context.Background(), ns, key, off, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// blobOf returns the stored blob record of the entry.
func blobOf(t *testing.T, s *Badger, ns string, key Key) (blobRecord, uploadID) {
	t.Helper()
	var rec blobRecord
	err := s.db.View(func(txn *badger.Txn) error {
		m, err := s.readMeta(txn, entryRef{ns, key})
		if err != nil {
			return err
		}
		item, err := txn.Get(blobKey(m.SHA256))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			rec, err = decodeBlob(v)
			return err
		})
	})
	if err != nil {
		t.Fatalf("read blob record: %v", err)
	}
	u, err := rec.uploadID()
	if err != nil {
		t.Fatal(err)
	}
	return rec, u
}

// countChunks counts chunk keys in the database.
func countChunks(t *testing.T, s *Badger) int {
	t.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixChunk)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCorruptChunkInDatabase(t *testing.T) {
	tests := []struct {
		name   string
		damage func(val []byte) []byte // nil deletes the chunk
	}{
		{"flipped data byte", func(v []byte) []byte { v[4+1000] ^= 0x01; return v }},
		{"flipped checksum", func(v []byte) []byte { v[0] ^= 0x80; return v }},
		{"truncated", func(v []byte) []byte { return v[:len(v)-1] }},
		{"missing", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openInternal(t, Config{Dir: t.TempDir()})
			defer s.Close()
			data := pattern(1, 3*mib+100)
			a, b, c := keyOf("a"), keyOf("b"), keyOf("c")
			mustPut(t, s, "default", a, data)
			mustPut(t, s, "other", b, data) // shares a's blob
			mustPut(t, s, "default", c, pattern(2, 10))
			_, u := blobOf(t, s, "default", a)

			err := s.db.Update(func(txn *badger.Txn) error {
				k := chunkKey(u, 1)
				if tc.damage == nil {
					return txn.Delete(k)
				}
				item, err := txn.Get(k)
				if err != nil {
					return err
				}
				v, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				return txn.Set(k, tc.damage(v))
			})
			if err != nil {
				t.Fatal(err)
			}

			// A range read that skips the bad chunk still works...
			if got, err := readAll(s, "default", a, 2*mib); err != nil || !bytes.Equal(got, data[2*mib:]) {
				t.Fatalf("range read past the bad chunk: %d bytes, %v", len(got), err)
			}
			// ...a read through it fails with ErrCorrupt after serving only
			// verified chunks.
			got, err := readAll(s, "default", a, 0)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read through the bad chunk: err %v, want ErrCorrupt", err)
			}
			if !bytes.Equal(got, data[:len(got)]) || len(got) > mib {
				t.Fatalf("served %d bytes before the bad chunk, want at most the first verified chunk", len(got))
			}
			for _, ref := range []entryRef{{"default", a}, {"other", b}} {
				if _, err := s.Stat(context.Background(), ref.ns, ref.key); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Stat %s after corruption = %v, want ErrNotFound (quarantined)", ref.ns, err)
				}
			}
			if _, err := s.Stat(context.Background(), "default", c); err != nil {
				t.Fatalf("unrelated entry: %v", err)
			}
			u2 := s.Usage()
			if u2.IntegrityFailures != 1 || u2.Entries != 1 || u2.Blobs != 1 || u2.Bytes != 10 {
				t.Fatalf("Usage = %+v, want 1 integrity failure and only c left", u2)
			}
			// The quarantine keeps a record of what was removed and why.
			err = s.db.View(func(txn *badger.Txn) error {
				_, err := txn.Get(entryKey(prefixQuarantine, "default", a))
				return err
			})
			if err != nil {
				t.Fatalf("quarantine record: %v", err)
			}
			// The key can be stored again and then reads fine.
			mustPut(t, s, "default", a, data)
			if got, err := readAll(s, "default", a, 0); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("re-stored entry: %d bytes, %v", len(got), err)
			}
		})
	}
}

// vlogFiles returns the value-log files in dir.
func vlogFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// flipInVlog flips one byte of needle where it occurs in a value-log file
// and reports the file.
func flipInVlog(t *testing.T, dir string, needle []byte) string {
	t.Helper()
	for _, f := range vlogFiles(t, dir) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(b, needle)
		if i < 0 {
			continue
		}
		fh, err := os.OpenFile(f, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		if _, err := fh.WriteAt([]byte{b[i+len(needle)/2] ^ 0xff}, int64(i+len(needle)/2)); err != nil {
			t.Fatal(err)
		}
		return f
	}
	t.Fatalf("pattern not found in any value-log file in %s", dir)
	return ""
}

func TestTamperedValueLogFile(t *testing.T) {
	tests := []struct {
		name string
		// reopenBeforeTamper starts a fresh value-log file first, so the
		// tampered file is not the last one (which Badger scans and
		// truncates at the first bad record when it opens).
		reopenBeforeTamper bool
	}{
		{"older vlog file", true},
		{"last vlog file", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openInternal(t, Config{Dir: dir})
			data := pattern(3, 3*mib+5)
			key := keyOf("tamper")
			mustPut(t, s, "default", key, data)
			mustPut(t, s, "default", keyOf("other"), pattern(4, 5000))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.reopenBeforeTamper {
				s = openInternal(t, Config{Dir: dir})
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			// Damage the second chunk, somewhere in its middle.
			flipInVlog(t, dir, data[mib+mib/2:mib+mib/2+64])

			s = openInternal(t, Config{Dir: dir})
			defer s.Close()
			got, err := readAll(s, "default", key, 0)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read of tampered entry: %d bytes, err %v; want ErrCorrupt", len(got), err)
			}
			if !bytes.Equal(got, data[:len(got)]) {
				t.Fatal("served bytes that differ from what was stored")
			}
			if _, err := s.Stat(context.Background(), "default", key); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Stat after detection = %v, want ErrNotFound", err)
			}
			if u := s.Usage(); u.IntegrityFailures != 1 {
				t.Fatalf("IntegrityFailures = %d, want 1", u.IntegrityFailures)
			}
			// The entry written after the damaged one is intact in an older
			// file; in the last file Badger's open-time scan truncated the
			// log at the damage, so it is gone too, and must be reported,
			// never served wrong.
			got, err = readAll(s, "default", keyOf("other"), 0)
			switch {
			case tc.reopenBeforeTamper && (err != nil || !bytes.Equal(got, pattern(4, 5000))):
				t.Fatalf("untouched entry: %d bytes, %v", len(got), err)
			case !tc.reopenBeforeTamper && !errors.Is(err, ErrCorrupt):
				t.Fatalf("entry after the truncation point: %d bytes, %v; want ErrCorrupt", len(got), err)
			}
		})
	}
}

func TestOrphanChunksCollectedOnOpen(t *testing.T) {
	dir := t.TempDir()
	s := openInternal(t, Config{Dir: dir})
	data := pattern(5, 2*mib+1)
	mustPut(t, s, "default", keyOf("kept"), data)
	live := countChunks(t, s)
	// Simulate uploads that died after staging chunks: chunks without a
	// blob record naming them.
	for _, n := range []uint32{1, 3} {
		u := newUploadID()
		for i := uint32(0); i < n; i++ {
			if err := s.writeChunk(chunkKey(u, i), append([]byte{0, 0, 0, 0}, pattern(6, 1000)...)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := countChunks(t, s); got != live+4 {
		t.Fatalf("chunks before reopen = %d, want %d", got, live+4)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openInternal(t, Config{Dir: dir})
	defer s.Close()
	if s.orphanChunks != 4 {
		t.Fatalf("collected %d orphan chunks, want 4", s.orphanChunks)
	}
	if got := countChunks(t, s); got != live {
		t.Fatalf("chunks after reopen = %d, want %d", got, live)
	}
	if got, err := readAll(s, "default", keyOf("kept"), 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("committed entry after collection: %v", err)
	}
}

func TestAccessFlushedInBatches(t *testing.T) {
	s := openInternal(t, Config{Dir: t.TempDir()})
	defer s.Close()
	key := keyOf("hits")
	mustPut(t, s, "default", key, []byte("data"))
	stored := func() Meta {
		var m Meta
		if err := s.db.View(func(txn *badger.Txn) error {
			var err error
			m, err = s.readMeta(txn, entryRef{"default", key})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return m
	}
	before := stored()
	for i := 0; i < 5; i++ {
		if _, err := readAll(s, "default", key, 0); err != nil {
			t.Fatal(err)
		}
	}
	if m := stored(); m.Hits != 0 || !m.LastAccess.Equal(before.LastAccess) {
		t.Fatalf("a Get wrote metadata (hits %d): accesses must be batched", m.Hits)
	}
	if err := s.flushAccess(); err != nil {
		t.Fatal(err)
	}
	m := stored()
	if m.Hits != 5 || !m.LastAccess.After(before.LastAccess) {
		t.Fatalf("after flush: hits %d, last access %v; want 5 and later than %v", m.Hits, m.LastAccess, before.LastAccess)
	}
	if st, _ := s.Stat(context.Background(), "default", key); st.Hits != 5 {
		t.Fatalf("Stat after flush: hits %d, want 5 (not double-counted)", st.Hits)
	}
}

func readAllCloser(rc io.ReadCloser) ([]byte, error) {
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestOpenWithSmallerLimitEvicts(t *testing.T) {
	dir := t.TempDir()
	s := openInternal(t, Config{Dir: dir})
	for i := 0; i < 4; i++ {
		mustPut(t, s, "default", keyOf(string(rune('a'+i))), pattern(byte(i), 1000))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openInternal(t, Config{Dir: dir, MaxBytes: 2500})
	defer s.Close()
	u := s.Usage()
	if u.Entries != 2 || u.Bytes != 2000 || u.Evictions != 2 {
		t.Fatalf("Usage after reopening with a 2500-byte limit = %+v, want the 2 newest entries", u)
	}
	for i, want := range []bool{false, false, true, true} {
		_, err := s.Stat(context.Background(), "default", keyOf(string(rune('a'+i))))
		if (err == nil) != want {
			t.Fatalf("entry %c present = %v, want %v", 'a'+i, err == nil, want)
		}
	}
}

func TestOpenDropsBrokenRecords(t *testing.T) {
	dir := t.TempDir()
	s := openInternal(t, Config{Dir: dir})
	good, data := keyOf("good"), pattern(10, 5000)
	mustPut(t, s, "default", good, data)
	mustPut(t, s, "default", keyOf("lost-blob"), pattern(11, 6000))
	lostSHA := sha256.Sum256(pattern(11, 6000))
	err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(metaKey("default", keyOf("garbage")), []byte("{not json")); err != nil {
			return err
		}
		return txn.Set(blobKey(lostSHA), []byte("garbage"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openInternal(t, Config{Dir: dir})
	defer s.Close()
	if u := s.Usage(); u.Entries != 1 || u.Blobs != 1 || u.Bytes != 5000 {
		t.Fatalf("Usage after dropping broken records = %+v", u)
	}
	if got, err := readAll(s, "default", good, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("good entry: %v", err)
	}
	for _, k := range []Key{keyOf("garbage"), keyOf("lost-blob")} {
		if _, err := s.Stat(context.Background(), "default", k); !errors.Is(err, ErrNotFound) {
			t.Fatalf("broken entry still visible: %v", err)
		}
	}
	if s.orphanChunks != 1 {
		t.Fatalf("collected %d chunks of the dropped blob, want 1", s.orphanChunks)
	}
}

// TestOpenInUse: a second Open of a directory whose store is open is
// ErrInUse (a second server on the same --data), which Badger reports only
// in the text of its lock error.
func TestOpenInUse(t *testing.T) {
	dir := t.TempDir()
	first, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := Open(Config{Dir: dir})
	if err == nil {
		second.Close()
		t.Fatal("a second Open of an open store succeeded")
	}
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open: %v; want ErrInUse", err)
	}
}
