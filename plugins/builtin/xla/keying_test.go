package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cachesvc/cachesvc/keying"
)

// TestKeyingCorpusGroups runs the corpus groups of SOURCES.md through the
// service's keying path (signature → built-in xla wasm → key): members of a
// group share a key, negative pairs do not, and the key is
// sha256("xla@<version>" ‖ 0 ‖ "xla" ‖ 0 ‖ canonical).
func TestKeyingCorpusGroups(t *testing.T) {
	loadWasm(t)
	k, err := keying.New(keying.Config{Host: loadedHost, KeepCanonical: true, MemoEntries: -1})
	if err != nil {
		t.Fatal(err)
	}
	dir := corpus(t)
	keyFor := func(rel, platform string) keying.Result {
		t.Helper()
		m, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		r, err := k.Key(context.Background(), signature(t, m, platform))
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if got := keying.ComputeKey("xla@"+Version, "xla", r.Canonical); got != r.Key {
			t.Fatalf("%s: key is not sha256(plugin ‖ 0 ‖ backend ‖ 0 ‖ canonical)", rel)
		}
		return r
	}
	const a = "stablehlo/jax_annotate_data_placement__data_"
	groups := map[string][]string{
		"G1": {a + "2025_04_07_tpu_gspmd.mlir", a + "2025_04_07_cuda_gspmd.mlir", a + "2025_06_30_cuda_gspmd.mlir"},
		"G2": {a + "2025_06_30_tpu_shardy.mlir", a + "2025_06_30_cuda_shardy.mlir"},
		"G4": {"hlo/jaxdocs_cog_2023-06-02_pjit_rms_norm_bf16_crlf.hlo", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo"},
		"P1": {"stablehlo/jaxdocs_aot_2024-06-21_jit_f_layout_mode.mlir", "stablehlo/jaxdocs_aot_2025-02-11_jit_f.mlir", "stablehlo/jaxdocs_aot_2025-05-01_jit_f.mlir"},
	}
	seen := map[string]string{}
	for name, files := range groups {
		first := keyFor(files[0], "cuda")
		for _, f := range files[1:] {
			if r := keyFor(f, "cuda"); r.Key != first.Key {
				t.Errorf("%s: %s and %s have different keys", name, files[0], f)
			}
		}
		if other, dup := seen[first.Key.String()]; dup {
			t.Errorf("groups %s and %s share a key", name, other)
		}
		seen[first.Key.String()] = name
	}
	r := keyFor(a+"2025_04_07_tpu_gspmd.mlir", "tpu")
	if _, dup := seen[r.Key.String()]; dup {
		t.Error("G1 on tpu shares the cuda key")
	}
	if r.DisplayName != "jit_func" || r.Plugin != "xla@"+Version || r.Components["platform"] != "tpu" {
		t.Errorf("result: display %q plugin %q components %v", r.DisplayName, r.Plugin, r.Components)
	}
	for _, p := range [][2]string{
		{"stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_c64.mlir", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_c128.mlir"},
		{"stablehlo/openxla_stablehlo__add_float32_20_20_float32_20_20.mlir", "stablehlo/openxla_stablehlo__add_bfloat16_20_20_bfloat16_20_20.mlir"},
		{"stablehlo/jax_tpu_Sharding__data_2025_06_30_gspmd.mlir", "stablehlo/jax_tpu_Sharding__data_2025_06_30_shardy.mlir"},
		{a + "2026_03_24_tpu_shardy.mlir", a + "2025_06_30_tpu_shardy.mlir"},
	} {
		if keyFor(p[0], "cuda").Key == keyFor(p[1], "cuda").Key {
			t.Errorf("%s and %s share a key", p[0], p[1])
		}
	}
}
