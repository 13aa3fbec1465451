package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestHotMetaSeesEveryChange: once a small entry is served from memory
// (its metadata from hotMetas, its bytes from the hot cache), every path
// that changes or removes it is visible to the next Get and Stat at once:
// delete, overwrite, quarantine (admin, reports, a corrupt chunk), restore,
// eviction (store bound, quota), expiry (idle, age) and the access-time
// flush.
func TestHotMetaSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	const ns = "default"
	old, fresh := pattern(1, 4<<10), pattern(2, 4<<10)
	tests := []struct {
		name string
		cfg  Config
		// change changes the entry key and returns the bytes a Get must
		// then return, nil for a miss.
		change func(t *testing.T, s *Badger, key Key) []byte
	}{
		{"delete", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			must(t, s.Delete(ctx, ns, key))
			return nil
		}},
		{"delete, then put new bytes", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			must(t, s.Delete(ctx, ns, key))
			mustPut(t, s, ns, key, fresh)
			return fresh
		}},
		{"conflicting put leaves it", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			_, err := s.Put(ctx, ns, key, bytes.NewReader(fresh), PutOptions{Size: int64(len(fresh))})
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("put of other bytes: %v, want ErrConflict", err)
			}
			return old
		}},
		{"admin quarantine", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			_, err := s.Quarantine(ctx, ns, key, "test")
			must(t, err)
			return nil
		}},
		{"reports past the threshold", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			_, err := s.Report(ctx, ns, key, Report{Reason: "bad", Reporter: "a"}, 1, false)
			must(t, err)
			return nil
		}},
		{"quarantine, then restore", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			_, err := s.Quarantine(ctx, ns, key, "test")
			must(t, err)
			if _, err := readAll(s, ns, key, 0); !errors.Is(err, ErrNotFound) {
				t.Fatalf("read while quarantined: %v, want ErrNotFound", err)
			}
			if _, err := s.Stat(ctx, ns, key); !errors.Is(err, ErrNotFound) {
				t.Fatalf("stat while quarantined: %v, want ErrNotFound", err)
			}
			_, err = s.Restore(ctx, ns, key)
			must(t, err)
			return old
		}},
		{"quarantine, then put new bytes", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			_, err := s.Quarantine(ctx, ns, key, "test")
			must(t, err)
			mustPut(t, s, ns, key, fresh)
			return fresh
		}},
		{"corrupt chunk read through another entry", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			other := keyOf("other")
			mustPut(t, s, ns, other, old) // shares the blob
			_, u := blobOf(t, s, ns, key)
			must(t, s.db.Update(func(txn *badger.Txn) error { return txn.Set(chunkKey(u, 0), []byte("junk")) }))
			s.hot.drop(sha256.Sum256(old)) // as if it had left the hot cache
			if _, err := readAll(s, ns, other, 0); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read of the corrupt blob: %v, want ErrCorrupt", err)
			}
			return nil
		}},
		{"evicted for the store bound", Config{MaxBytes: 6 << 10}, func(t *testing.T, s *Badger, key Key) []byte {
			mustPut(t, s, ns, keyOf("newer"), fresh)
			return nil
		}},
		{"evicted for the namespace quota", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			must(t, s.SetQuotas(Quotas{Namespaces: map[string]Quota{ns: {MaxEntries: 1}}}))
			mustPut(t, s, ns, keyOf("newer"), fresh)
			return nil
		}},
		{"idle expiry", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			must(t, s.SetQuotas(Quotas{Namespaces: map[string]Quota{ns: {MaxIdle: time.Hour}}}))
			if n := s.ExpirePass(time.Now().Add(2 * time.Hour)); n != 1 {
				t.Fatalf("expiry pass removed %d entries, want 1", n)
			}
			return nil
		}},
		{"age expiry", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			must(t, s.SetQuotas(Quotas{Namespaces: map[string]Quota{ns: {MaxAge: time.Hour}}}))
			if n := s.ExpirePass(time.Now().Add(2 * time.Hour)); n != 1 {
				t.Fatalf("expiry pass removed %d entries, want 1", n)
			}
			return nil
		}},
		{"access times flushed", Config{}, func(t *testing.T, s *Badger, key Key) []byte {
			must(t, s.enterWrite())
			err := s.flushAccess()
			s.leaveWrite()
			must(t, err)
			return old
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Dir, cfg.ExpiryInterval, cfg.FlushInterval = t.TempDir(), -1, time.Hour
			s := openInternal(t, cfg)
			defer s.Close()
			key := keyOf("entry")
			ref := entryRef{ns, key}
			mustPut(t, s, ns, key, old)
			gets := int64(0)
			for range 3 {
				got, err := readAll(s, ns, key, 0)
				if err != nil || !bytes.Equal(got, old) {
					t.Fatalf("read: %d bytes, %v", len(got), err)
				}
				gets++
			}
			if _, ok := s.hotMeta.get(ref); !ok {
				t.Fatal("the entry's metadata is not served from memory after three reads")
			}
			want := tc.change(t, s, key)

			st, serr := s.Stat(ctx, ns, key)
			m, rc, err := s.Get(ctx, ns, key, 0, -1)
			if want == nil {
				if !errors.Is(err, ErrNotFound) || !errors.Is(serr, ErrNotFound) {
					t.Fatalf("after the change: Get %v, Stat %v; want ErrNotFound", err, serr)
				}
				return
			}
			if err != nil || serr != nil {
				t.Fatalf("after the change: Get %v, Stat %v", err, serr)
			}
			got, err := readAllCloser(rc)
			if err != nil || !bytes.Equal(got, want) || m.SHA256 != sha256.Sum256(want) || st.SHA256 != m.SHA256 {
				t.Fatalf("after the change: %d bytes (%v), sha256 %x (Stat %x); want the %d bytes of %x",
					len(got), err, m.SHA256[:4], st.SHA256[:4], len(want), sha256.Sum256(want))
			}
			if bytes.Equal(want, old) && tc.name == "access times flushed" {
				// Flushed hits are counted once: from the record, not
				// again from the accounting.
				if st.Hits != gets || m.Hits != gets+1 {
					t.Fatalf("hits after the flush: Stat %d, Get %d; want %d, %d", st.Hits, m.Hits, gets, gets+1)
				}
			}
			// And the new state is served from memory again.
			for range 2 {
				if _, err := readAll(s, ns, key, 0); err != nil {
					t.Fatal(err)
				}
			}
			if c, ok := s.hotMeta.get(ref); !ok || c.SHA256 != sha256.Sum256(want) {
				t.Fatalf("cached again: %v, sha256 %x", ok, c.SHA256[:4])
			}
		})
	}
}

// TestHotMetaAccess: a Get served from memory still counts as an access:
// the hit count and last access time it returns and Stat reports move, and
// idle expiry (which reads the in-memory accounting) keeps the entry.
func TestHotMetaAccess(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Config{Dir: t.TempDir(), ExpiryInterval: -1, FlushInterval: time.Hour})
	defer s.Close()
	must(t, s.SetQuotas(Quotas{Default: Quota{MaxIdle: time.Hour}}))
	read, idle := keyOf("read"), keyOf("idle")
	mustPut(t, s, "default", read, pattern(1, 100))
	mustPut(t, s, "default", idle, pattern(2, 100))
	for range 2 {
		if _, err := readAll(s, "default", read, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := s.hotMeta.get(entryRef{"default", read}); !ok {
		t.Fatal("not served from memory")
	}
	time.Sleep(5 * time.Millisecond)
	mid := time.Now()
	m, rc, err := s.Get(ctx, "default", read, 0, -1)
	must(t, err)
	must(t, rc.Close())
	st, err := s.Stat(ctx, "default", read)
	must(t, err)
	if m.Hits != 3 || st.Hits != 3 || m.LastAccess.Before(mid) || !st.LastAccess.Equal(m.LastAccess) {
		t.Fatalf("Get: hits %d, last access %v; Stat: hits %d, %v; want 3 hits, at or after %v",
			m.Hits, m.LastAccess, st.Hits, st.LastAccess, mid)
	}
	// An hour after mid, less a millisecond: "idle" was last touched before
	// mid, so it is idle past the bound; "read" was read after mid.
	if n := s.ExpirePass(mid.Add(time.Hour - time.Millisecond)); n != 1 {
		t.Fatalf("expiry pass removed %d entries, want 1 (the idle one)", n)
	}
	if _, err := readAll(s, "default", read, 0); err != nil {
		t.Fatalf("the entry read from memory was expired: %v", err)
	}
	if _, err := s.Stat(ctx, "default", idle); !errors.Is(err, ErrNotFound) {
		t.Fatalf("idle entry: %v, want ErrNotFound", err)
	}
}

// TestHotMetaRaces: readers filling the cache from snapshots taken before
// a delete or a put never leave stale metadata behind: right after each
// change returns, the writer's own Get sees it.
func TestHotMetaRaces(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, Config{Dir: t.TempDir(), ExpiryInterval: -1})
	defer s.Close()
	key := keyOf("raced")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, rc, err := s.Get(ctx, "default", key, 0, -1); err == nil {
					_, _ = readAllCloser(rc)
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 200 {
		data := pattern(byte(i), 512)
		mustPut(t, s, "default", key, data)
		for range 2 {
			got, err := readAll(s, "default", key, 0)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("round %d: read after put: %d bytes, %v", i, len(got), err)
			}
		}
		must(t, s.Delete(ctx, "default", key))
		if _, err := readAll(s, "default", key, 0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("round %d: read after delete: %v, want ErrNotFound", i, err)
		}
		if _, err := s.Stat(ctx, "default", key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("round %d: stat after delete: %v, want ErrNotFound", i, err)
		}
	}
}

// TestHotMetaBound: the cache holds at most hotMetaEntries, and a reader
// that began before a forget cannot put what it read.
func TestHotMetaBound(t *testing.T) {
	var c hotMetas
	for i := range hotMetaEntries + 10 {
		c.put(entryRef{"default", keyOf(fmt.Sprint(i))}, Meta{Size: int64(i)}, c.begin())
	}
	if n := c.len(); n != hotMetaEntries {
		t.Fatalf("cache holds %d entries, want the bound %d", n, hotMetaEntries)
	}
	ref := entryRef{"default", keyOf("late")}
	gen := c.begin()
	c.forget(entryRef{"default", keyOf("elsewhere")})
	c.put(ref, Meta{Size: 1}, gen)
	if _, ok := c.get(ref); ok {
		t.Fatal("a put that began before a forget was kept")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
