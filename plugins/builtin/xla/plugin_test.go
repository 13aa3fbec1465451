package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/plugins/builtin/xla/xlacanon"
	"github.com/cachesvc/cachesvc/plugins/pluginstest"
	"github.com/cachesvc/cachesvc/plugins/sdk"
)

var (
	loadOnce   sync.Once
	loaded     *plugins.Plugin
	loadErr    error
	loadedHost *plugins.Host
)

// TestMain closes the shared host after all tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if loadedHost != nil {
		loadedHost.Close(context.Background())
	}
	os.Exit(code)
}

// loadWasm returns the built-in xla plugin of a real wazero host (the
// embedded copy of the committed xla.wasm, checked equal to the file), loaded
// once per test binary: compiling the module is the slow part, especially
// under -race.
func loadWasm(t testing.TB) *plugins.Plugin {
	t.Helper()
	loadOnce.Do(func() {
		wasm, err := os.ReadFile("xla.wasm")
		if err != nil {
			loadErr = fmt.Errorf("read committed xla.wasm (run scripts/build-plugins.sh): %w", err)
			return
		}
		if mods, _ := plugins.Builtins(); !bytes.Equal(mods["xla.wasm"], wasm) {
			loadErr = fmt.Errorf("the embedded built-in xla.wasm differs from plugins/builtin/xla/xla.wasm")
			return
		}
		ctx := context.Background()
		// A shared compilation cache (precompiled without the race
		// detector when this binary has it) keeps -race runs fast.
		loadedHost, err = plugins.NewHost(ctx, plugins.Config{PoolSize: 2, CacheDir: pluginstest.CacheDir(t)})
		if err != nil {
			loadErr = err
			return
		}
		if loadErr = loadedHost.LoadBuiltins(ctx); loadErr != nil {
			return
		}
		var ok bool
		if loaded, ok = loadedHost.ForBackend("xla"); !ok {
			loadErr = fmt.Errorf("no built-in plugin for backend xla")
		}
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	if info := loaded.Info(); info.ID != "xla@"+Version || len(info.Backends) != 1 || info.Backends[0] != "xla" {
		t.Fatalf("describe: %+v", info)
	}
	return loaded
}

func corpus(t testing.TB) string {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("..", "..", "..", "..", "shared", "corpus"))
	if _, err := os.Stat(filepath.Join(dir, "SOURCES.md")); err != nil {
		t.Skipf("corpus not found at %s (CI keeps ../shared/corpus beside the clone)", dir)
	}
	return dir
}

func signature(t testing.TB, module []byte, platform string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"backend": "xla", "platform": platform, "jaxlib_version": "0.7.1",
		"xla_flags": []string{"--xla_gpu_autotune_level=2", "--xla_dump_to=/tmp/d"}, "module": string(module)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// key is the key the service makes (DESIGN.md): sha256(name@version ‖ 0 ‖
// backend ‖ 0 ‖ canonical).
func key(canonical []byte) string {
	h := sha256.New()
	h.Write([]byte("xla@" + Version + "\x00xla\x00"))
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}

// TestWasmMatchesNative runs every corpus module through the real wasm
// plugin and natively: canonical bytes, components and display names agree,
// and normalize is a fixed point with the same canonical bytes.
func TestWasmMatchesNative(t *testing.T) {
	p := loadWasm(t)
	ctx := context.Background()
	files, _ := filepath.Glob(filepath.Join(corpus(t), "*", "*"))
	for _, f := range files {
		if filepath.Ext(f) == ".txt" {
			continue
		}
		m, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sig := signature(t, m, "cuda")
		got, err := p.Canonicalize(ctx, sig)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want, err := sdk.Invoke(sig)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Canonical) != string(want.Canonical) || got.DisplayName != want.DisplayName {
			t.Errorf("%s: wasm and native results differ", filepath.Base(f))
		}
		for k, v := range want.Components {
			if got.Components[k] != v {
				t.Errorf("%s: component %s = %q in wasm, %q natively", filepath.Base(f), k, got.Components[k], v)
			}
		}
		norm, err := p.Normalize(ctx, sig)
		if err != nil {
			t.Fatal(err)
		}
		again, err := p.Canonicalize(ctx, norm)
		if err != nil || string(again.Canonical) != string(got.Canonical) {
			t.Errorf("%s: canonicalize(normalize(s)) differs (%v)", filepath.Base(f), err)
		}
	}
}

// TestWasmCorpusGroups: the SOURCES.md groups share keys through the real
// wasm plugin, and the negative pairs do not (the full table lives in
// xlacanon/corpus_test.go).
func TestWasmCorpusGroups(t *testing.T) {
	p := loadWasm(t)
	dir := corpus(t)
	keyFor := func(rel, platform string) string {
		m, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Canonicalize(context.Background(), signature(t, m, platform))
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		return key(r.Canonical)
	}
	const a = "stablehlo/jax_annotate_data_placement__data_"
	same := [][]string{
		{a + "2025_04_07_tpu_gspmd.mlir", a + "2025_04_07_cuda_gspmd.mlir", a + "2025_06_30_cuda_gspmd.mlir"},
		{a + "2025_06_30_tpu_shardy.mlir", a + "2025_06_30_cuda_shardy.mlir"},
		{"hlo/jaxdocs_cog_2023-06-02_pjit_rms_norm_bf16_crlf.hlo", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo"},
		{"stablehlo/jaxdocs_aot_2024-06-21_jit_f_layout_mode.mlir", "stablehlo/jaxdocs_aot_2025-02-11_jit_f.mlir", "stablehlo/jaxdocs_aot_2025-05-01_jit_f.mlir"},
	}
	for _, g := range same {
		want := keyFor(g[0], "cuda")
		for _, f := range g[1:] {
			if keyFor(f, "cuda") != want {
				t.Errorf("%s and %s should share a key", g[0], f)
			}
		}
	}
	differ := [][2]string{
		{"stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f32.mlir", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f64.mlir"},
		{"hlo/jaxdocs_cog_2022-12-16_pjit_rms_norm_f16.hlo", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo"},
		{a + "2025_06_30_tpu_shardy.mlir", a + "2026_02_04_rocm_shardy.mlir"},
		{"stablehlo/jaxdocs_aot_2025-05-01_jit_f.mlir", "stablehlo/jaxdocs_aot_2025-05-01_jit_f_static_arg7.mlir"},
		{a + "2025_04_07_tpu_gspmd.mlir", a + "2025_06_30_tpu_gspmd.mlir"},
	}
	for _, d := range differ {
		if keyFor(d[0], "cuda") == keyFor(d[1], "cuda") {
			t.Errorf("%s and %s should not share a key", d[0], d[1])
		}
	}
	if keyFor(a+"2025_04_07_tpu_gspmd.mlir", "tpu") == keyFor(a+"2025_04_07_cuda_gspmd.mlir", "cuda") {
		t.Error("platform is not in the key")
	}
}

func TestWasmErrors(t *testing.T) {
	p := loadWasm(t)
	_, err := p.Canonicalize(context.Background(), []byte(`{"backend":"xla","platform":"cpu","module":"module {}","bogus":1}`))
	if err == nil {
		t.Fatal("unknown field accepted")
	}
}

func benchPlugin(b *testing.B, size int, escapeHTML bool) {
	p := loadWasm(b)
	sig := xlacanon.GenerateSignature(size)
	if escapeHTML { // as Go's json.Marshal writes it: <, > and & as \u escapes
		var err error
		if sig, err = json.Marshal(json.RawMessage(sig)); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	benchLoop(b, sig, func() error {
		_, err := p.Canonicalize(ctx, sig)
		return err
	})
}

// benchLoop times call on sig after one untimed call (buffers sized, pages
// touched) and reports, besides wall time, the process's CPU time per call
// (the host's copies and GC included): on a shared machine wall time also
// counts waiting for a core, CPU time much less so.
func benchLoop(b *testing.B, sig []byte, call func() error) {
	if err := call(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(sig)))
	b.ResetTimer()
	cpu0, cpuOK := processCPU()
	for i := 0; i < b.N; i++ {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	}
}

// BenchmarkNativeCanonicalize10MiB is BenchmarkPluginCanonicalize10MiB's
// work done by xlacanon natively, in the same test binary, so that the
// plugin / native ratio comes from one process on one machine state
// (-bench 'Canonicalize10MiB$' interleaves them with -count).
func BenchmarkNativeCanonicalize10MiB(b *testing.B) {
	sig := xlacanon.GenerateSignature(10 << 20)
	var c xlacanon.Canonicalizer
	benchLoop(b, sig, func() error {
		_, err := c.Canonicalize(sig)
		return err
	})
}

// BenchmarkPluginCanonicalize1MiB measures the xla plugin through the real
// wazero host (input copy, wasm canonicalization, canonical copy-out) on a
// 1 MiB generated module, in a signature encoded as Python's json.dumps does
// it (the trainer client's encoding); compare with xlacanon's native
// benchmarks.
func BenchmarkPluginCanonicalize1MiB(b *testing.B) { benchPlugin(b, 1<<20, false) }

// BenchmarkPluginCanonicalize10MiB is the same on a 10 MiB module.
func BenchmarkPluginCanonicalize10MiB(b *testing.B) { benchPlugin(b, 10<<20, false) }

// BenchmarkPluginCanonicalize10MiBEscapedHTML is the 10 MiB module encoded by
// Go's json.Marshal, which writes every '<', '>' and '&' as a six-byte \u
// escape (every tensor<...> type): 28% more bytes, most of them escapes that
// the decoder takes one at a time.
func BenchmarkPluginCanonicalize10MiBEscapedHTML(b *testing.B) { benchPlugin(b, 10<<20, true) }

// TestWasmJaxlibBuild: through the real wasm plugin, the jaxlib_build
// fingerprint splits keys, its absence leaves the record of a signature
// without it unchanged, and a bad value is refused.
func TestWasmJaxlibBuild(t *testing.T) {
	p := loadWasm(t)
	ctx := context.Background()
	mod := "module @jit_f {\n  func.func public @main(%arg0: tensor<i32>) -> tensor<i32> {\n    return %arg0 : tensor<i32>\n  }\n}\n"
	keyOf := func(build any) (string, map[string]string) {
		t.Helper()
		s := map[string]any{"backend": "xla", "platform": "cpu", "jaxlib_version": "0.10.2", "module": mod}
		if build != nil {
			s["jaxlib_build"] = build
		}
		b, _ := json.Marshal(s)
		r, err := p.Canonicalize(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return key(r.Canonical), r.Components
	}
	none, comp := keyOf(nil)
	if _, ok := comp["jaxlib_build"]; ok {
		t.Error("jaxlib_build component without the field")
	}
	a, comp := keyOf("aa" + strings.Repeat("0", 62))
	if comp["jaxlib_build"] != "aa"+strings.Repeat("0", 62) {
		t.Errorf("components %v", comp)
	}
	b, _ := keyOf("bb" + strings.Repeat("0", 62))
	if empty, _ := keyOf(""); empty != none {
		t.Error(`jaxlib_build "" differs from an absent one`)
	}
	if none == a || a == b || none == b {
		t.Errorf("keys absent %s, build a %s, build b %s: want three", none, a, b)
	}
	_, err := p.Canonicalize(ctx, []byte(`{"backend":"xla","platform":"cpu","jaxlib_build":"xyz","module":"module {}"}`))
	if err == nil || !strings.Contains(err.Error(), `"jaxlib_build" must be 64 lowercase hex digits`) {
		t.Errorf("bad jaxlib_build: %v", err)
	}
}
