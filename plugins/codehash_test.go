package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"

	"github.com/cachesvc/cachesvc/plugins/pluginstest"
)

// TestCodeSHA256: two builds of one name@version (empty and emptyfix both
// describe themselves as empty@1) have one ID and different code hashes,
// each the SHA-256 of its file, as Info reports it too.
func TestCodeSHA256(t *testing.T) {
	ctx := context.Background()
	files := []string{"empty", "emptyfix"}
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join("testdata", f+".wasm"))
	}
	dir := pluginstest.CacheDir(t, paths...)
	got := map[string]string{}
	for _, name := range files {
		h, err := NewHost(ctx, Config{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close(ctx)
		wasm := readTestdata(t, name)
		p, err := h.Load(ctx, name+".wasm", wasm)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(wasm)
		if want := hex.EncodeToString(sum[:]); p.CodeSHA256() != want || p.Info().SHA256 != want {
			t.Errorf("%s: CodeSHA256 %s, Info.SHA256 %s; want %s", name, p.CodeSHA256(), p.Info().SHA256, want)
		}
		if p.ID() != "empty@1" {
			t.Errorf("%s: ID %s, want empty@1", name, p.ID())
		}
		got[name] = p.CodeSHA256()
	}
	if got["empty"] == got["emptyfix"] {
		t.Fatalf("two builds share code hash %s", got["empty"])
	}
}
