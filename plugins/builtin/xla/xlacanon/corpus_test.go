package xlacanon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// corpusDir locates ../shared/corpus beside the repository root (CI keeps
// the shared corpus next to the clone) or skips the test.
func corpusDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("repository root (go.mod) not found")
		}
		dir = parent
	}
	c := filepath.Join(dir, "..", "shared", "corpus")
	if _, err := os.Stat(filepath.Join(c, "SOURCES.md")); err != nil {
		t.Skipf("corpus not found at %s (CI keeps ../shared/corpus beside the clone): %v", c, err)
	}
	return c
}

// corpusModules returns every module file of the corpus (relative path →
// contents); the logs directory holds no modules.
func corpusModules(t testing.TB) map[string][]byte {
	t.Helper()
	dir := corpusDir(t)
	out := map[string][]byte{}
	for _, sub := range []string{"stablehlo", "hlo"} {
		files, err := filepath.Glob(filepath.Join(dir, sub, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[sub+"/"+filepath.Base(f)] = b
		}
	}
	if len(out) < 30 {
		t.Fatalf("corpus has only %d modules", len(out))
	}
	return out
}

// sigFor builds a signature JSON for module with the given fields (module and
// backend are filled in; platform defaults to "cuda").
func sigFor(t testing.TB, module []byte, fields map[string]any) []byte {
	t.Helper()
	m := map[string]any{"backend": "xla", "module": string(module), "platform": "cuda"}
	for k, v := range fields {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keyOf canonicalizes sig and returns the key the host would make.
func keyOf(t testing.TB, sig []byte) string {
	t.Helper()
	r, err := Canonicalize(sig)
	if err != nil {
		t.Fatalf("canonicalize: %v", err)
	}
	h := sha256.New()
	h.Write([]byte("xla@test\x00xla\x00"))
	h.Write(r.Canonical)
	return hex.EncodeToString(h.Sum(nil))
}

const (
	annot = "stablehlo/jax_annotate_data_placement__data_"
	aot   = "stablehlo/jaxdocs_aot_"
)

// mustMatch are the groups of SOURCES.md ("Expected canonicalization
// outcomes") whose members must share one key, plus the team's decision on
// policy group P1.
var mustMatch = []struct {
	name  string
	files []string
}{
	// G1: byte-identical; platform is outside the text (same platform here).
	{"G1", []string{annot + "2025_04_07_tpu_gspmd.mlir", annot + "2025_04_07_cuda_gspmd.mlir", annot + "2025_06_30_cuda_gspmd.mlir"}},
	// G2: byte-identical shardy pair.
	{"G2", []string{annot + "2025_06_30_tpu_shardy.mlir", annot + "2025_06_30_cuda_shardy.mlir"}},
	// G4: CRLF vs LF.
	{"G4", []string{"hlo/jaxdocs_cog_2023-06-02_pjit_rms_norm_bf16_crlf.hlo", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo"}},
	// P1 (policy): the same f(x,y)=2*x+y printed by three JAX versions
	// differs only in the module name, jax.result_info and
	// mhlo.layout_mode = "default" (equal to absent) — all removed.
	// jaxdocs_aot_2024-05-07_jit_f.0.mlir stays apart: it lacks the
	// mhlo.num_partitions/num_replicas module attributes, and inserting
	// defaults is not a text-level certainty (when in doubt, keep it).
	{"P1", []string{aot + "2024-06-21_jit_f_layout_mode.mlir", aot + "2025-02-11_jit_f.mlir", aot + "2025-05-01_jit_f.mlir"}},
}

// mustDiffer are the negative pairs SOURCES.md lists ("Must stay
// DIFFERENT") and the policy groups the team keeps apart (P2 dialect, P4
// sharding). TestCorpusAllOtherPairsDiffer checks every other pair too.
var mustDiffer = []struct {
	why  string
	a, b string
}{
	{"element type f32/f64", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f32.mlir", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f64.mlir"},
	{"element type c64/c128", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_c64.mlir", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_c128.mlir"},
	{"element type f32/c64", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f32.mlir", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_c64.mlir"},
	{"dtype and constants, same @jit_main", "stablehlo/openxla_stablehlo__add_float32_20_20_float32_20_20.mlir", "stablehlo/openxla_stablehlo__add_bfloat16_20_20_bfloat16_20_20.mlir"},
	{"f16 vs bf16 (and backend_config dtype byte)", "hlo/jaxdocs_cog_2022-12-16_pjit_rms_norm_f16.hlo", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo"},
	{"f16 vs bf16 CRLF", "hlo/jaxdocs_cog_2022-12-16_pjit_rms_norm_f16.hlo", "hlo/jaxdocs_cog_2023-06-02_pjit_rms_norm_bf16_crlf.hlo"},
	{"tensor<1xf32> vs tensor<2xf32>", annot + "2025_06_30_tpu_shardy.mlir", annot + "2026_02_04_rocm_shardy.mlir"},
	{"same @jit_f, different program", aot + "2025-05-01_jit_f.mlir", aot + "2025-05-01_jit_f_static_arg7.mlir"},
	{"same @jit_func, different program (gspmd)", annot + "2026_03_24_tpu_shardy.mlir", annot + "2025_04_07_tpu_gspmd.mlir"},
	{"same @jit_func, different program (shardy)", annot + "2026_03_24_tpu_shardy.mlir", annot + "2025_06_30_tpu_shardy.mlir"},
	{"same @jit_func, different program (rocm)", annot + "2026_03_24_tpu_shardy.mlir", annot + "2026_02_04_rocm_shardy.mlir"},
	{"gspmd vs shardy lowering", "stablehlo/jax_tpu_Sharding__data_2025_06_30_gspmd.mlir", "stablehlo/jax_tpu_Sharding__data_2025_06_30_shardy.mlir"},
	{"P2: MHLO vs StableHLO dialect", aot + "2022-09-02_jit_f.0_mhlo.mlir", aot + "2024-05-07_jit_f.0.mlir"},
	{"P1 remainder: module attributes absent vs present", aot + "2024-05-07_jit_f.0.mlir", aot + "2025-05-01_jit_f.mlir"},
	{"P4: {maximal device=0} vs {replicated}", annot + "2025_04_07_tpu_gspmd.mlir", annot + "2025_06_30_tpu_gspmd.mlir"},
	{"P3: gspmd vs shardy encodings", annot + "2025_06_30_cuda_gspmd.mlir", annot + "2025_06_30_cuda_shardy.mlir"},
	{"ApproxTopK 2 vs 4 results", "stablehlo/jax_tpu_ApproxTopK__data_2023_04_17.mlir", "stablehlo/jax_tpu_ApproxTopK__data_2023_05_16.mlir"},
}

func TestCorpusMustMatch(t *testing.T) {
	mods := corpusModules(t)
	for _, g := range mustMatch {
		t.Run(g.name, func(t *testing.T) {
			want := keyOf(t, sigFor(t, mods[g.files[0]], nil))
			for _, f := range g.files[1:] {
				if got := keyOf(t, sigFor(t, mods[f], nil)); got != want {
					t.Errorf("%s: key %s, want %s (as %s)", f, got, want, g.files[0])
				}
			}
		})
	}
}

func TestCorpusMustDiffer(t *testing.T) {
	mods := corpusModules(t)
	for _, p := range mustDiffer {
		t.Run(p.why, func(t *testing.T) {
			a, b := mods[p.a], mods[p.b]
			if a == nil || b == nil {
				t.Fatalf("corpus file missing: %s or %s", p.a, p.b)
			}
			if keyOf(t, sigFor(t, a, nil)) == keyOf(t, sigFor(t, b, nil)) {
				t.Errorf("%s and %s share a key", p.a, p.b)
			}
		})
	}
}

// TestCorpusAllOtherPairsDiffer: every two corpus modules that are not in
// one mustMatch group get different keys.
func TestCorpusAllOtherPairsDiffer(t *testing.T) {
	mods := corpusModules(t)
	group := map[string]string{}
	for _, g := range mustMatch {
		for _, f := range g.files {
			group[f] = g.name
		}
	}
	byKey := map[string]string{}
	for f, m := range mods {
		k := keyOf(t, sigFor(t, m, nil))
		if other, ok := byKey[k]; ok && (group[f] == "" || group[f] != group[other]) {
			t.Errorf("%s and %s share key %s but are in no common group", f, other, k)
		}
		byKey[k] = f
	}
}

// TestCorpusPlatformSplitsG1: G1 is byte-identical across TPU and CUDA; the
// platform field keeps their keys apart.
func TestCorpusPlatformSplitsG1(t *testing.T) {
	mods := corpusModules(t)
	tpu := keyOf(t, sigFor(t, mods[annot+"2025_04_07_tpu_gspmd.mlir"], map[string]any{"platform": "tpu"}))
	cuda := keyOf(t, sigFor(t, mods[annot+"2025_04_07_cuda_gspmd.mlir"], map[string]any{"platform": "cuda"}))
	if tpu == cuda {
		t.Fatal("tpu and cuda signatures of G1 share a key")
	}
}

func TestCorpusIdempotentAndNormalize(t *testing.T) {
	for f, m := range corpusModules(t) {
		t.Run(f, func(t *testing.T) {
			out, _, format, err := CanonicalModule(m, "")
			if err != nil {
				t.Fatal(err)
			}
			again, _, _, err := CanonicalModule(out, format)
			if err != nil || string(again) != string(out) {
				t.Fatalf("canonical text is not a fixed point (err %v)", err)
			}
			sig := sigFor(t, m, map[string]any{"xla_flags": []string{"--xla_b=1 --xla_a", "--xla_dump_to=/tmp"}, "jaxlib_version": "0.7.1", "extra": map[string]any{"k": []int{1, 2}}})
			var c Canonicalizer
			norm, err := c.Normalize(sig)
			if err != nil {
				t.Fatal(err)
			}
			norm = append([]byte(nil), norm...)
			if !json.Valid(norm) {
				t.Fatalf("normalized signature is not JSON: %.200s", norm)
			}
			if keyOf(t, norm) != keyOf(t, sig) {
				t.Fatal("canonicalize(normalize(s)) != canonicalize(s)")
			}
			norm2, err := c.Normalize(norm)
			if err != nil || string(norm2) != string(norm) {
				t.Fatalf("normalize is not idempotent (err %v)", err)
			}
		})
	}
}
