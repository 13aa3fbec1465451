package keying

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/plugins"
)

// emptySig is a signature of the empty backend, which the test plugins
// empty and emptyfix (both empty@1) key differently.
var emptySig = []byte(`{"backend":"empty","program":"f"}`)

// emptyKey is the key plugin build name ("empty" or "emptyfix") gives
// emptySig.
func emptyKey(name string) string {
	canonical := emptySig
	if name == "emptyfix" {
		canonical = append([]byte("fixed:"), emptySig...)
	}
	return ComputeKey("empty@1", "empty", canonical).String()
}

// TestRestartWithChangedPluginFile: a server restarted with another file
// under the same name@version (a plugin bug fix that forgot to bump the
// version) keys with the new code at once; the memo file the old code
// filled answers neither a full signature nor a digest-first lookup. With
// the same file the memo file answers both.
func TestRestartWithChangedPluginFile(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, before, after string
		wantMemo            bool
		wantOther           uint64 // results of other code found
	}{
		{"same file", "empty", "empty", true, 0},
		{"changed file", "empty", "emptyfix", false, 1},
		{"changed back", "emptyfix", "empty", false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "memo")
			a := newKeyerWith(t, []string{tt.before}, plugins.Config{}, Config{MemoFile: file})
			res, err := a.Key(ctx, emptySig)
			if err != nil || res.Key.String() != emptyKey(tt.before) {
				t.Fatalf("before the restart: %s %v, want key %s", res.Key, err, emptyKey(tt.before))
			}
			if err := a.Close(ctx); err != nil {
				t.Fatal(err)
			}

			b := newKeyerWith(t, []string{tt.after}, plugins.Config{}, Config{MemoFile: file})
			defer b.Close(ctx)
			got, known := b.LookupDigest(ctx, SignatureDigest(emptySig), "")
			if known != tt.wantMemo || known && got.Key.String() != emptyKey(tt.after) {
				t.Fatalf("digest-first lookup after the restart: known=%v key %s; want known=%v", known, got.Key, tt.wantMemo)
			}
			res, err = b.Key(ctx, emptySig)
			if err != nil {
				t.Fatal(err)
			}
			if res.Key.String() != emptyKey(tt.after) || res.Memo != tt.wantMemo {
				t.Fatalf("after the restart: key %s memo=%v; want key %s (of %s) memo=%v",
					res.Key, res.Memo, emptyKey(tt.after), tt.after, tt.wantMemo)
			}
			if got := b.OtherCodeCounts()["empty@1"]; got != tt.wantOther {
				t.Fatalf("other code results counted: %d, want %d", got, tt.wantOther)
			}
			// The new code's result replaced the old one: the next lookup
			// is a memo hit of the new key.
			if res, err := b.Key(ctx, emptySig); err != nil || !res.Memo || res.Key.String() != emptyKey(tt.after) {
				t.Fatalf("second lookup: key %s memo=%v err %v; want a memo hit of %s", res.Key, res.Memo, err, emptyKey(tt.after))
			}
		})
	}
}

// TestMemoFileOldFormat: a memo file of format 1 (an older cachesvc's,
// whose results do not say which plugin code computed them) is dropped at
// start and counted, never used, and rewritten in the current format.
func TestMemoFileOldFormat(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "memo")
	digest := SignatureDigest(emptySig)
	line := fmt.Sprintf(`%x {"v":1,"key":%q,"plugin":"empty@1","backend":"empty","components":{},"canonical_size":3}`,
		digest, emptyKey("empty"))
	tests := []struct {
		name, content      string
		loaded, old, known int
	}{
		{"format 1", memoFileHeaderV1 + "\n" + line + "\n" + line + "\n", 0, 2, 0},
		{"format 1, empty", memoFileHeaderV1 + "\n", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(file, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			k := newKeyerWith(t, []string{"empty"}, plugins.Config{}, Config{MemoFile: file})
			st := k.MemoFileStats()
			if st.Loaded != tt.loaded || st.OldFormat != tt.old || st.Skipped != 0 {
				t.Fatalf("memo file stats %+v, want loaded %d, old format %d", st, tt.loaded, tt.old)
			}
			if _, ok := k.LookupDigest(ctx, digest, ""); ok {
				t.Fatal("a result of the old format answered a digest lookup")
			}
			if err := k.Close(ctx); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if first, _, _ := strings.Cut(string(b), "\n"); tt.old > 0 && first != memoFileHeader {
				t.Fatalf("memo file after a save starts with %q, want %s", first, memoFileHeader)
			}
		})
	}
}
