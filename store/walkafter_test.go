package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

// TestWalkAfter resumes walks from cursors in and across namespaces,
// including cursors that name no entry.
func TestWalkAfter(t *testing.T) {
	s, err := store.Open(store.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var keys []store.Key
	for i := byte(0); i < 4; i++ {
		keys = append(keys, store.Key{i * 16})
	}
	for _, ns := range []string{"a", "a.b", "b"} {
		for _, k := range keys {
			if _, err := s.Put(ctx, ns, k, bytes.NewReader([]byte(ns)), store.PutOptions{Size: -1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	walk := func(ns, afterNS string, after store.Key) []string {
		var got []string
		err := s.WalkAfter(ctx, ns, afterNS, after, func(m store.Meta) bool {
			got = append(got, m.Namespace+"/"+string(rune('0'+m.Key[0]/16)))
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	tests := []struct {
		name, ns, afterNS string
		after             store.Key
		want              []string
	}{
		{"in ns from an entry", "a", "a", keys[1], []string{"a/2", "a/3"}},
		{"in ns from no entry", "a", "a", store.Key{17}, []string{"a/2", "a/3"}},
		{"in ns from the last", "a", "a", keys[3], nil},
		{"cursor before ns", "b", "a", keys[2], []string{"b/0", "b/1", "b/2", "b/3"}},
		{"cursor after ns", "a", "b", keys[0], nil},
		{"all namespaces", "", "a", keys[3], []string{"a.b/0", "a.b/1", "a.b/2", "a.b/3", "b/0", "b/1", "b/2", "b/3"}},
		{"all from the middle", "", "a.b", keys[2], []string{"a.b/3", "b/0", "b/1", "b/2", "b/3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := walk(tc.ns, tc.afterNS, tc.after); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
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
