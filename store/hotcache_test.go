package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// TestHotCacheServesAndForgets: a small entry read once is served from
// memory (its blob record and chunk no longer needed), with ranges and
// access counts as before; a delete, a quarantine or an eviction is seen at
// once, and large or multi-chunk blobs are never cached.
func TestHotCacheServesAndForgets(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		size   int
		cached bool
		// remove takes the entry away; nil keeps it.
		remove func(t *testing.T, s *Badger, key Key)
	}{
		{"small, kept", 4 << 10, true, nil},
		{"empty, kept", 0, false, nil},
		{"64 KiB, deleted", hotEntryMax, true, func(t *testing.T, s *Badger, key Key) {
			if err := s.Delete(ctx, "default", key); err != nil {
				t.Fatal(err)
			}
		}},
		{"small, quarantined", 100, true, func(t *testing.T, s *Badger, key Key) {
			if _, err := s.Quarantine(ctx, "default", key, "test"); err != nil {
				t.Fatal(err)
			}
		}},
		{"over the entry limit", hotEntryMax + 1, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openInternal(t, Config{Dir: t.TempDir()})
			defer s.Close()
			data := pattern(3, tc.size)
			key := keyOf(tc.name)
			mustPut(t, s, "default", key, data)
			for i := range 2 {
				got, err := readAll(s, "default", key, 0)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("read %d: %d bytes, %v; want the %d stored", i, len(got), err, len(data))
				}
			}
			blobs, _ := s.hot.stats()
			if (blobs == 1) != tc.cached {
				t.Fatalf("cached blobs = %d, want cached %v", blobs, tc.cached)
			}
			if tc.cached {
				// Served from memory: the chunks are not read again.
				rec, u := blobOf(t, s, "default", key)
				if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(chunkKey(u, 0)) }); err != nil {
					t.Fatal(err)
				}
				got, err := readAll(s, "default", key, int64(tc.size/2))
				if err != nil || !bytes.Equal(got, data[tc.size/2:]) {
					t.Fatalf("cached range read: %d bytes, %v", len(got), err)
				}
				m, rc, err := s.Get(ctx, "default", key, 10, 20)
				if err != nil {
					t.Fatal(err)
				}
				got, err = readAllCloser(rc)
				if err != nil || !bytes.Equal(got, data[10:30]) || m.Hits < 3 || rec.Size != int64(tc.size) {
					t.Fatalf("cached Get(10, 20) = %q, %v, hits %d", got, err, m.Hits)
				}
			}
			if tc.remove == nil {
				return
			}
			tc.remove(t, s, key)
			if _, err := readAll(s, "default", key, 0); !errors.Is(err, ErrNotFound) {
				t.Fatalf("read after removal: %v, want ErrNotFound", err)
			}
			if blobs, _ := s.hot.stats(); blobs != 0 {
				t.Fatalf("%d blobs still cached after their last entry went", blobs)
			}
		})
	}
}

// TestHotCacheBound: the cache never holds more than its bound, dropping the
// least recently read blobs first; a negative bound disables it.
func TestHotCacheBound(t *testing.T) {
	tests := []struct {
		name      string
		max       int64
		wantBlobs int
	}{
		{"room for two", 2 * 4 << 10, 2},
		{"disabled", -1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openInternal(t, Config{Dir: t.TempDir(), HotCacheBytes: tc.max})
			defer s.Close()
			for i := range 3 {
				key := keyOf(string(rune('a' + i)))
				mustPut(t, s, "default", key, pattern(byte(i), 4<<10))
				if _, err := readAll(s, "default", key, 0); err != nil {
					t.Fatal(err)
				}
			}
			blobs, used := s.hot.stats()
			if blobs != tc.wantBlobs || used > max(tc.max, 0) {
				t.Fatalf("cache holds %d blobs, %d bytes; want %d blobs within %d bytes", blobs, used, tc.wantBlobs, tc.max)
			}
			if tc.wantBlobs > 0 {
				if _, ok := s.hot.get(sha256.Sum256(pattern(0, 4<<10))); ok {
					t.Fatal("the least recently read blob is still cached")
				}
			}
		})
	}
}

// TestHotCacheKeepsWhatIsRead: a blob read between insertions is never the
// one dropped, however many blobs pass through the cache (a hit moves it
// to the front unless it is already in the front quarter).
func TestHotCacheKeepsWhatIsRead(t *testing.T) {
	for _, blobs := range []int{2, 8, 64} {
		c := hotCache{max: int64(blobs) * 16}
		hot := sha256.Sum256([]byte("hot"))
		c.put(hot, make([]byte, 16))
		for i := range 20 * blobs {
			c.put(sha256.Sum256([]byte{byte(i), byte(i >> 8)}), make([]byte, 16))
			if _, ok := c.get(hot); !ok {
				t.Fatalf("%d blobs: the blob read after every insertion was dropped at insertion %d", blobs, i)
			}
		}
		if n, used := c.stats(); n != blobs || used != int64(blobs)*16 {
			t.Fatalf("%d blobs: cache holds %d blobs, %d bytes", blobs, n, used)
		}
	}
}
