package plugins

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

// builtinFS holds the committed built-in plugins, rebuilt by
// scripts/build-plugins.sh: builtin/<name>/<name>.wasm.
//
//go:embed builtin/*/*.wasm
var builtinFS embed.FS

// Builtins returns the embedded built-in plugin modules by file name
// (e.g. "passthrough.wasm"), sorted.
func Builtins() (map[string][]byte, []string) {
	files, _ := fs.Glob(builtinFS, "builtin/*/*.wasm")
	sort.Strings(files)
	out := make(map[string][]byte, len(files))
	names := make([]string, 0, len(files))
	for _, f := range files {
		b, err := builtinFS.ReadFile(f)
		if err != nil {
			continue
		}
		out[path.Base(f)] = b
		names = append(names, path.Base(f))
	}
	return out, names
}

// DeferBuiltins registers the embedded built-ins to be compiled on first use
// (the first ForBackend, Backends, Plugins or Ready call), so that a server
// starts at once and a process that never computes a key never compiles
// them. Use LoadBuiltins to fail fast instead.
func (h *Host) DeferBuiltins() {
	mods, names := Builtins()
	h.pendMu.Lock()
	defer h.pendMu.Unlock()
	for _, n := range names {
		h.pending = append(h.pending, pendingModule{source: "builtin:" + n, wasm: mods[n]})
	}
}

// LoadBuiltins loads every embedded built-in plugin.
func (h *Host) LoadBuiltins(ctx context.Context) error {
	mods, names := Builtins()
	for _, n := range names {
		if _, err := h.Load(ctx, "builtin:"+n, mods[n]); err != nil {
			return fmt.Errorf("load built-in plugins: %w", err)
		}
	}
	return nil
}
