package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"testing"

	"log/slog"
)

// TestMetaCacheNeverStale reads entries through the decoded-record caches
// while they are rewritten: deleted and stored again with other bytes and
// other components, and with their access times flushed.
func TestMetaCacheNeverStale(t *testing.T) {
	s, err := Open(Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	key := Key(sha256.Sum256([]byte("metacache")))
	for i, tc := range []struct {
		data []byte
		comp map[string]string
	}{
		{bytes.Repeat([]byte{1}, 100), map[string]string{"module": "a"}},
		{bytes.Repeat([]byte{2}, 5000), map[string]string{"module": "b", "flags": "c"}},
		{[]byte{}, nil},
		// The first bytes again: its blob was freed, so it is stored anew
		// under another upload id (a stale blob record would miss its
		// chunks).
		{bytes.Repeat([]byte{1}, 100), map[string]string{"module": "a"}},
	} {
		if i > 0 {
			if err := s.Delete(ctx, "default", key); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Put(ctx, "default", key, bytes.NewReader(tc.data), PutOptions{Size: int64(len(tc.data)), Components: tc.comp}); err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 3; round++ {
			m, rc, err := s.Get(ctx, "default", key, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.data) || m.Size != int64(len(tc.data)) || m.SHA256 != sha256.Sum256(tc.data) {
				t.Fatalf("version %d round %d: got %d bytes, meta size %d; want version %d's %d bytes", i, round, len(got), m.Size, i, len(tc.data))
			}
			if len(m.Components) != len(tc.comp) || m.Components["module"] != tc.comp["module"] {
				t.Fatalf("version %d round %d: components %v, want %v", i, round, m.Components, tc.comp)
			}
			// A caller changing its copy changes nothing stored or cached.
			if m.Components != nil {
				m.Components["module"] = "changed"
			}
			st, err := s.Stat(ctx, "default", key)
			if err != nil {
				t.Fatal(err)
			}
			if st.Components["module"] != tc.comp["module"] {
				t.Fatalf("version %d round %d: Stat components %v after the caller changed its copy, want %v", i, round, st.Components, tc.comp)
			}
			if st.Hits != int64(round+1) {
				t.Fatalf("version %d round %d: Stat hits %d, want %d", i, round, st.Hits, round+1)
			}
			if round == 1 {
				if err := s.flushAccess(); err != nil { // access times written: a new version of the record
					t.Fatal(err)
				}
			}
		}
	}
}
