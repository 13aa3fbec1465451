package plugins

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommittedWasmIsFresh rebuilds every built-in and test plugin with
// scripts/build-plugins.sh into a temporary directory and compares the bytes
// with the committed .wasm files: a source change without a rebuild fails
// here. It skips under a Go toolchain other than plugins/builtin/TOOLCHAIN
// (the output depends on the compiler) and with -short.
func TestCommittedWasmIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("rebuilds wasm; skipped with -short")
	}
	want, err := os.ReadFile(filepath.Join("builtin", "TOOLCHAIN"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Skipf("no go toolchain: %v", err)
	}
	if strings.TrimSpace(string(got)) != strings.TrimSpace(string(want)) {
		t.Skipf("toolchain %s differs from %s that built the committed plugins", bytes.TrimSpace(got), bytes.TrimSpace(want))
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "../scripts/build-plugins.sh", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build-plugins.sh: %v\n%s", err, b)
	}
	committed, _ := filepath.Glob("builtin/*/*.wasm")
	tests, _ := filepath.Glob("testdata/*.wasm")
	committed = append(committed, tests...)
	if len(committed) < 4 {
		t.Fatalf("found only %v", committed)
	}
	for _, f := range committed {
		a, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, "plugins", f))
		if err != nil {
			t.Errorf("%s: not rebuilt by the script: %v", f, err)
			continue
		}
		if !bytes.Equal(a, b) {
			t.Errorf("plugins/%s is stale: run scripts/build-plugins.sh and commit it", f)
		}
	}
}
