package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCommittedWasmIsFresh rebuilds xla.wasm with scripts/build-plugins.sh
// and compares it with the committed file, so that the embedded built-in
// always matches these sources. It skips under another Go toolchain than
// plugins/builtin/TOOLCHAIN (the build is reproducible only per toolchain).
func TestCommittedWasmIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("rebuilds the plugin")
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(root, "plugins", "builtin", "TOOLCHAIN"))
	if err != nil {
		t.Skipf("no TOOLCHAIN file: %v", err)
	}
	if strings.TrimSpace(string(want)) != runtime.Version() {
		t.Skipf("toolchain %s, plugins were built with %s", runtime.Version(), strings.TrimSpace(string(want)))
	}
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "build-plugins.sh"), out)
	cmd.Env = append(os.Environ(), "PLUGINS=xla")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build-plugins.sh: %v\n%s", err, b)
	}
	built, err := os.ReadFile(filepath.Join(out, "plugins", "builtin", "xla", "xla.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("xla.wasm")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, committed) {
		t.Fatal("plugins/builtin/xla/xla.wasm is stale: run scripts/build-plugins.sh and commit it")
	}
}
