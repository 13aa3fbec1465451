package xlacanon

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCorpusMutationsChangeKey(t *testing.T) {
	mods := corpusModules(t)
	tests := []struct {
		name, file, old, new string
	}{
		{"dtype f32->f16", annot + "2025_04_07_tpu_gspmd.mlir", "tensor<1xf32>", "tensor<1xf16>"},
		{"dimension", annot + "2025_04_07_tpu_gspmd.mlir", "tensor<1xf32>", "tensor<3xf32>"},
		{"sharding string", annot + "2025_04_07_tpu_gspmd.mlir", `"{maximal device=0}"`, `"{maximal device=1}"`},
		{"whitespace inside a sharding string", annot + "2025_04_07_tpu_gspmd.mlir", `"{maximal device=0}"`, `"{maximal  device=0}"`},
		{"memory kind", annot + "2025_04_07_tpu_gspmd.mlir", `mhlo.memory_kind = "device"`, `mhlo.memory_kind = "pinned_host"`},
		{"buffer placement", annot + "2025_04_07_tpu_gspmd.mlir", `_xla_buffer_placement = "pinned_host"`, `_xla_buffer_placement = "device"`},
		{"sdy sharding", annot + "2025_06_30_tpu_shardy.mlir", `[{"a"}]>} loc("x")`, `[{}]>} loc("x")`},
		{"num_partitions", "stablehlo/jax_tpu_Sharding__data_2025_06_30_shardy.mlir", "mhlo.num_partitions = 2", "mhlo.num_partitions = 4"},
		{"constant", aot + "2025-05-01_jit_f.mlir", "dense<2>", "dense<3>"},
		{"hex constant", "stablehlo/openxla_stablehlo__add_float32_20_20_float32_20_20.mlir", `dense<"0xC681`, `dense<"0xC682`},
		{"custom call backend_config", "stablehlo/jax_tpu_ApproxTopK__data_2023_04_17.mlir", "top_k = 3 : i64", "top_k = 2 : i64"},
		{"custom call target", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f32.mlir", "@lapack_sgeqrf_ffi", "@lapack_dgeqrf_ffi"},
		{"triton kernel blob", "stablehlo/jax_pallas_triton_add_one__data_2024_05_02.mlir", `ir = "ML\EFR`, `ir = "ML\EFS`},
		{"private function name", "stablehlo/jax_cuda_threefry2x32__data_2024_07_30.mlir", "@_uniform", "@_uniform2"},
		{"hlo dtype", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo", "bf16[4,512,512]{2,1,0} parameter(0)", "f16[4,512,512]{2,1,0} parameter(0)"},
		{"hlo sharding", "hlo/openxla_xla__gpu_layout_assignment_test__jit_conv_general_dilated.hlo", "sharding={replicated}", "sharding={maximal device=0}"},
		{"hlo constant", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo", "constant(4)", "constant(8)"},
		{"hlo opaque backend_config padding byte", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo", `\255\177`, `\027\177`},
		{"hlo layout", "hlo/openxla_xla__gpu_layout_assignment_test__jit_conv_general_dilated.hlo", "bf16[1,64,64,16]{3,2,1,0}", "bf16[1,64,64,16]{0,1,2,3}"},
		{"hlo header attribute", "hlo/jaxdocs_cog_2024-11-19_pjit_custom_p_loss.hlo", "num_partitions=4", "num_partitions=8"},
		{"hlo window", "hlo/openxla_xla__reduce_window_test__jit_dilated_window_sum.10.hlo", "rhs_dilate=1x2x2", "rhs_dilate=1x2x1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := string(mods[tt.file])
			if !strings.Contains(src, tt.old) {
				t.Fatalf("%s does not contain %q", tt.file, tt.old)
			}
			mut := strings.Replace(src, tt.old, tt.new, 1)
			if keyOf(t, sigFor(t, []byte(src), nil)) == keyOf(t, sigFor(t, []byte(mut), nil)) {
				t.Errorf("mutation %q -> %q kept the key", tt.old, tt.new)
			}
		})
	}
}

func TestSignatureFieldsChangeKey(t *testing.T) {
	mods := corpusModules(t)
	m := mods[aot+"2025-05-01_jit_f.mlir"]
	base := map[string]any{
		"platform": "cuda", "platform_version": "12.4", "jaxlib_version": "0.7.1",
		"xla_flags":       []string{"--xla_gpu_autotune_level=2", "--xla_dump_to=/tmp/a"},
		"compile_options": "3f0a", "topology": "fp:abc", "codec": "zstandard", "extra": map[string]any{"hook": "x"},
	}
	want := keyOf(t, sigFor(t, m, base))
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range base {
			c[kk] = vv
		}
		c[k] = v
		return c
	}
	same := []struct {
		name   string
		fields map[string]any
	}{
		{"excluded flag changed", with("xla_flags", []string{"--xla_gpu_autotune_level=2", "--xla_dump_to=/elsewhere", "--xla_dump_hlo_as_text"})},
		{"excluded flags dropped", with("xla_flags", []string{"--xla_gpu_autotune_level=2"})},
		{"flags as one XLA_FLAGS string", with("xla_flags", []string{" --xla_dump_to=/tmp/b   --xla_gpu_autotune_level=2 "})},
		{"force host device count excluded (as in JAX)", with("xla_flags", []string{"--xla_gpu_autotune_level=2", "--xla_force_host_platform_device_count=8"})},
		{"extra whitespace", with("extra", json.RawMessage(`{ "hook" : "x" }`))},
	}
	for _, tt := range same {
		if got := keyOf(t, sigFor(t, m, tt.fields)); got != want {
			t.Errorf("%s: key changed", tt.name)
		}
	}
	differ := []struct {
		name   string
		fields map[string]any
	}{
		{"platform", with("platform", "rocm")},
		{"platform version", with("platform_version", "12.5")},
		{"jaxlib version", with("jaxlib_version", "0.7.2")},
		{"flag value", with("xla_flags", []string{"--xla_gpu_autotune_level=3"})},
		{"flag added", with("xla_flags", []string{"--xla_gpu_autotune_level=2", "--xla_gpu_enable_triton_gemm=false"})},
		{"flag removed", with("xla_flags", []string{})},
		{"compile options", with("compile_options", "3f0b")},
		{"topology", with("topology", "fp:abd")},
		{"topology as kinds", with("topology", []string{"fp:abc"})},
		{"codec", with("codec", "zlib")},
		{"extra", with("extra", map[string]any{"hook": "y"})},
		{"extra absent", with("extra", nil)},
	}
	for _, tt := range differ {
		if got := keyOf(t, sigFor(t, m, tt.fields)); got == want {
			t.Errorf("%s: key did not change", tt.name)
		}
	}
}
