package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/plugins/builtin/pt2/pt2sig"
	"github.com/cachesvc/cachesvc/plugins/pluginstest"
)

const fxKey = "pt2:fx-graph-v1::fk5sdq3zvq2hztgoxzf6m7q4ouyw3fpldd7bmlz4ixu7yxtqsxlm:c1"

// TestWasmKeys runs the embedded pt2.wasm in a real wazero host through a
// Keyer: the Redis form (what the RESP listener passes) and the bare form
// with components (what cachesvc.torch sends) give one key, the key is
// sha256("pt2@Version" ‖ 0 ‖ "pt2" ‖ 0 ‖ canonical), and errors reach the
// caller as bad signatures.
func TestWasmKeys(t *testing.T) {
	if mods, _ := plugins.Builtins(); !bytes.Equal(mods["pt2.wasm"], mustRead(t, "pt2.wasm")) {
		t.Fatal("the embedded built-in pt2.wasm differs from plugins/builtin/pt2/pt2.wasm")
	}
	k := keyingtest.Keyer(t, plugins.Config{PoolSize: 1}, keying.Config{})
	ctx := context.Background()
	resp, err := k.Key(ctx, []byte(`{"backend":"pt2","key":"`+fxKey+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Plugin != "pt2@"+Version || resp.Backend != "pt2" {
		t.Fatalf("plugin %q backend %q", resp.Plugin, resp.Backend)
	}
	want := sha256.Sum256([]byte("pt2@" + Version + "\x00pt2\x00" + fxKey))
	if resp.Key != want {
		t.Errorf("key %s, want sha256 of plugin, backend and torch's key", resp.Key)
	}
	bare, err := k.Key(ctx, []byte(`{"backend":"pt2","cache":"fx-graph-v1","key":"fk5sdq3zvq2hztgoxzf6m7q4ouyw3fpldd7bmlz4ixu7yxtqsxlm",`+
		`"name":"forward","torch_version":"2.15.0","device":"cpu","graph":"0a1b","inductor_config":"2c3d"}`))
	if err != nil {
		t.Fatal(err)
	}
	if bare.Key != resp.Key {
		t.Errorf("bare form with components gives key %s, Redis form %s", bare.Key, resp.Key)
	}
	if bare.DisplayName != "forward" || bare.Components["graph"] != "0a1b" || bare.Components["cache"] != "fxgraph" {
		t.Errorf("result %+v", bare)
	}
	native, err := pt2sig.Canonicalize([]byte(`{"backend":"pt2","key":"` + fxKey + `"}`))
	if err != nil || resp.DisplayName != native.DisplayName || resp.Components["cache"] != native.Components["cache"] {
		t.Errorf("wasm %+v and native %+v differ (%v)", resp, native, err)
	}
	if _, err := k.Key(ctx, []byte(`{"backend":"pt2","key":"fk5s"}`)); err == nil || !strings.Contains(err.Error(), "a bare key needs field cache") {
		t.Errorf("bare key without cache: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConformance runs the ABI conformance check (what `cachesvc plugin
// check --corpus testdata/probes` runs) over signatures of every cache
// kind: deterministic, idempotent through normalize, within limits.
func TestConformance(t *testing.T) {
	ctx := context.Background()
	h, err := plugins.NewHost(ctx, plugins.Config{PoolSize: 1, CacheDir: pluginstest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	wasm := mustRead(t, "pt2.wasm")
	probes, err := plugins.LoadCorpus("testdata/probes", plugins.Info{Backends: []string{"pt2"}}, nil)
	if err != nil || len(probes) < 6 {
		t.Fatalf("probes %d, %v", len(probes), err)
	}
	rep, err := h.Check(ctx, "pt2.wasm", wasm, probes)
	if err != nil {
		t.Fatal(err)
	}
	idempotent := 0
	for _, r := range rep.Results {
		if strings.HasPrefix(r.Name, "idempotent") && r.OK && !r.Skipped {
			idempotent++
		}
	}
	if !rep.OK || idempotent != len(probes) {
		t.Fatalf("check failed or idempotence not exercised (%d of %d): %+v", idempotent, len(probes), rep.Results)
	}
}
