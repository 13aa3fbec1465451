package keying

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/plugins"
)

func passthroughSig(i int) []byte {
	return fmt.Appendf(nil, `{"backend":"passthrough","kind":"jax","key":"jit_persist-%d"}`, i)
}

// TestMemoFileRoundTrip: a closed Keyer's memo is the next one's, within
// the memo's bounds (the most recent results kept), and answers digest
// lookups without the signature.
func TestMemoFileRoundTrip(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "memo")
	a := newTestKeyer(t, plugins.Config{}, Config{MemoFile: file, MemoEntries: 3})
	var keys []string
	for i := range 5 {
		res, err := a.Key(ctx, passthroughSig(i))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, res.Key.String())
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := a.MemoFileStats(); st.Saves != 1 || st.Failures != 0 {
		t.Fatalf("file stats after close: %+v", st)
	}
	b := newTestKeyer(t, plugins.Config{}, Config{MemoFile: file, MemoEntries: 3})
	defer b.Close(ctx)
	if st := b.MemoFileStats(); st.Loaded != 3 || st.Skipped != 0 {
		t.Fatalf("loaded %+v, want the 3 the memo held", st)
	}
	for i := range 5 {
		res, ok := b.LookupDigest(ctx, SignatureDigest(passthroughSig(i)), "passthrough")
		if want := i >= 2; ok != want || ok && res.Key.String() != keys[i] {
			t.Errorf("signature %d: %v %s, want known=%v key %s", i, ok, res.Key, want, keys[i])
		}
	}
}

// TestMemoFileDamaged: a damaged file costs the damaged lines (or the
// whole file when it is not ours), never the start.
func TestMemoFileDamaged(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "memo")
	a := newTestKeyer(t, plugins.Config{}, Config{MemoFile: file})
	for i := range 2 {
		if _, err := a.Key(ctx, passthroughSig(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	if len(lines) != 4 || lines[3] != "" { // header, 2 results, ""
		t.Fatalf("memo file:\n%s", good)
	}
	tests := []struct {
		name            string
		content         string
		loaded, skipped int
	}{
		{"intact", string(good), 2, 0},
		{"a bad line", lines[0] + "zz not a line\n" + lines[2], 1, 1},
		{"a value of another format", lines[0] + strings.Replace(lines[1], `"v":2`, `"v":9`, 1) + lines[2], 1, 1},
		{"cut short by a crash", lines[0] + lines[1] + lines[2][:20], 1, 0},
		{"not a memo file", "hello\n" + lines[1], 0, 0},
		{"empty", "", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(file, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			k := newTestKeyer(t, plugins.Config{}, Config{MemoFile: file})
			defer k.Close(ctx)
			if st := k.MemoFileStats(); st.Loaded != tt.loaded || st.Skipped != tt.skipped {
				t.Fatalf("stats %+v, want loaded %d skipped %d", st, tt.loaded, tt.skipped)
			}
			n := 0
			for i := range 2 {
				if _, ok := k.LookupDigest(ctx, SignatureDigest(passthroughSig(i)), ""); ok {
					n++
				}
			}
			if n != tt.loaded {
				t.Fatalf("%d digests known, want %d", n, tt.loaded)
			}
		})
	}
}

// TestMemoFileConcurrentSaves hammers the memo while it is being saved
// (run with -race): every save is a whole file the next Keyer loads.
func TestMemoFileConcurrentSaves(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "memo")
	k := newTestKeyer(t, plugins.Config{}, Config{MemoFile: file, MemoSaveInterval: time.Millisecond})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := k.Key(ctx, passthroughSig(g*1000+i)); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					if err := k.SaveMemo(); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if err := k.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b := newTestKeyer(t, plugins.Config{}, Config{MemoFile: file})
	defer b.Close(ctx)
	if st := b.MemoFileStats(); st.Loaded != 200 || st.Skipped != 0 {
		t.Fatalf("loaded %+v, want all 200 results", st)
	}
}
