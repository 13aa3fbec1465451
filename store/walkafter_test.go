package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestWalkAfter: the capability suite (storetest.RunWalkAfter).
func TestWalkAfter(t *testing.T) {
	storetest.RunWalkAfter(t, openBadger)
}

// skipWalker is a store whose WalkAfter is store.WalkAfter's fallback for
// stores without one: a walk from the start, skipping to the cursor.
type skipWalker struct{ store.Store }

func (w skipWalker) WalkAfter(ctx context.Context, ns, afterNS string, afterKey store.Key, fn func(store.Meta) bool) error {
	return store.WalkAfter(ctx, struct{ store.Store }{w.Store}, ns, afterNS, afterKey, fn)
}

// TestWalkAfterBySkipping: the fallback visits what WalkAfter does.
func TestWalkAfterBySkipping(t *testing.T) {
	storetest.RunWalkAfter(t, func(t *testing.T, dir string, lim storetest.Limits) store.Store {
		return skipWalker{openBadger(t, dir, lim)}
	})
}

// TestReadCountsNoAccess: Read serves the bytes without a hit or a new
// access time; Put keeps a declared creation time.
func TestReadCountsNoAccess(t *testing.T) {
	s, err := store.Open(store.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	body := bytes.Repeat([]byte("x"), 3<<20)
	created := time.Date(2024, 5, 6, 7, 8, 9, 10, time.UTC)
	k := store.Key(sha256.Sum256(body))
	if _, err := s.Put(ctx, "ns", k, bytes.NewReader(body), store.PutOptions{Size: int64(len(body)), Created: created}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Stat(ctx, "ns", k)
	if err != nil || !before.Created.Equal(created) || !before.LastAccess.After(created) {
		t.Fatalf("stat: %v, created %v, last access %v", err, before.Created, before.LastAccess)
	}
	time.Sleep(10 * time.Millisecond)
	m, rc, err := s.Read(ctx, "ns", k)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, body) || m.Hits != 0 {
		t.Fatalf("read: %v, %d bytes, hits %d", err, len(got), m.Hits)
	}
	after, _ := s.Stat(ctx, "ns", k)
	if after.Hits != 0 || !after.LastAccess.Equal(before.LastAccess) {
		t.Errorf("Read counted an access: hits %d, last access %v → %v", after.Hits, before.LastAccess, after.LastAccess)
	}
}
