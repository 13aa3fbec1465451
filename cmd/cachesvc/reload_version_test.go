package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/plugins"
)

// rebuilt returns wasm with a custom section appended: other bytes, the
// same plugin and the same name@version, as a rebuild or a changed build
// whose author forgot to bump the version.
func rebuilt(wasm []byte, tag string) []byte {
	c := binary.AppendUvarint(nil, uint64(len(tag)))
	c = append(c, tag...)
	c = append(c, "rebuilt"...)
	out := append(bytes.Clone(wasm), 0)
	out = binary.AppendUvarint(out, uint64(len(c)))
	return append(out, c...)
}

// TestReloadWarnsWhenAFileChangesButNotItsVersion: a reload whose plugin
// file has new bytes under the same name@version loads the new code (it
// may be a harmless rebuild) and warns, naming the plugin, its file and
// where keys may now differ; a replacement with a new version, or an
// unchanged file, warns of nothing. The replaced plugin's results leave the
// signature memo (before, they stayed, and the old code's keys kept being
// served for signatures it had keyed); an unchanged file's stay.
func TestReloadWarnsWhenAFileChangesButNotItsVersion(t *testing.T) {
	ctx := context.Background()
	empty, err := os.ReadFile("../../plugins/testdata/empty.wasm")
	if err != nil {
		t.Fatal(err)
	}
	h, err := plugins.NewHost(ctx, plugins.Config{CacheDir: testWasmCache(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	dir := t.TempDir()
	file := filepath.Join(dir, "empty.wasm")
	writeAtomic(t, file, empty)
	if _, err := h.LoadDir(ctx, dir); err != nil {
		t.Fatal(err)
	}
	before, _ := h.ForBackend("empty")
	k, err := keying.New(keying.Config{Host: h})
	if err != nil {
		t.Fatal(err)
	}
	sig := []byte(`{"backend":"empty","z":1}`)
	memoized := func() bool {
		t.Helper()
		res, err := k.Key(ctx, sig)
		if err != nil {
			t.Fatal(err)
		}
		return res.Memo
	}
	memoized()

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	m := api.NewPluginMetrics()
	warning := "plugin file changed but its version did not"

	// Unchanged: no warning.
	reloadPluginDir(ctx, h, k, dir, logger, m)
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("an unchanged file warned:\n%s", logs.String())
	}
	if !memoized() {
		t.Fatal("a reload of an unchanged file cleared the memo")
	}
	// New bytes, same empty@1: loaded, and warned about.
	writeAtomic(t, file, rebuilt(empty, "v2"))
	reloadPluginDir(ctx, h, k, dir, logger, m)
	after, _ := h.ForBackend("empty")
	if after == before || after.ID() != "empty@1" {
		t.Fatalf("the changed file was not loaded: %v -> %v", before.ID(), after.ID())
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, warning) {
			line = l
		}
	}
	for _, want := range []string{"level=WARN", "plugin=empty@1", "file=" + file, "stored entries", "memo_forgotten=1", "shared memo", "bump"} {
		if !strings.Contains(line, want) {
			t.Errorf("warning line lacks %q: %s\nlogs:\n%s", want, line, logs.String())
		}
	}
	if memoized() {
		t.Error("after the file changed under the same name@version, the memo still answered with the old code's key")
	}
	// The reloaded plugin's failure series are exported at 0, so that an
	// alert on their increase sees its first failure.
	if got := failureSeries(t, m, "empty@1"); got != 11 {
		t.Errorf("after the reload, %d cachesvc_plugin_failures_total series of empty@1 at 0, want one per kind (11)", got)
	}
}

// failureSeries counts m's cachesvc_plugin_failures_total series of plugin
// that are at 0.
func failureSeries(t *testing.T, m *api.PluginMetrics, plugin string) int {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != "cachesvc_plugin_failures_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "plugin" && l.GetValue() == plugin && s.GetCounter().GetValue() == 0 {
					n++
				}
			}
		}
	}
	return n
}
