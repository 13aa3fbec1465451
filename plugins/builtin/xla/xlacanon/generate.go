package xlacanon

import (
	"strconv"
)

// GenerateModule returns a deterministic StableHLO module of at least size
// bytes (and at most a few KiB more), shaped like JAX output with debug info:
// #loc alias lines before and after the module, NameLoc/FileLineCol/CallSite
// locations on every op and argument, printer-chosen SSA names, sharding and
// memory-kind attributes, jax.result_info, dense constants and custom calls
// with string payloads. Benchmarks and the plugin host's throughput tests use
// it as the large input.
func GenerateModule(size int) []byte {
	b := make([]byte, 0, size+8192)
	b = append(b, "#loc1 = loc(\"x\")\n#loc2 = loc(\"y\")\n"...)
	b = append(b, "module @jit_generated attributes {jax.uses_shape_polymorphism = false, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"...)
	b = append(b, "  func.func public @main(%arg0: tensor<8x128xf32> {mhlo.memory_kind = \"device\", mhlo.sharding = \"{replicated}\"} loc(\"x\"), %arg1: tensor<8x128xf32> {mhlo.sharding = \"{replicated}\"} loc(\"y\")) -> (tensor<8x128xf32> {jax.result_info = \"result\", mhlo.sharding = \"{replicated}\"}) {\n"...)
	b = append(b, "    %0 = call @f0(%arg0, %arg1) : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xf32> loc(#loc4)\n"...)
	b = append(b, "    return %0 : tensor<8x128xf32> loc(#loc)\n  } loc(#loc)\n"...)
	var aliases []byte
	loc := 5
	for k := 0; len(b)+len(aliases) < size; k++ {
		ks := strconv.Itoa(k)
		l := func() string { loc++; return "#loc" + strconv.Itoa(loc) }
		b = append(b, "  func.func private @f"...)
		b = append(b, ks...)
		b = append(b, "(%arg0: tensor<8x128xf32> {mhlo.layout_mode = \"default\"} loc(\"jit(func)/jit(main)/pjit[in_shardings=(UnspecifiedValue, UnspecifiedValue) out_shardings=(UnspecifiedValue,) name=f"...)
		b = append(b, ks...)
		b = append(b, " keep_unused=False inline=False]\"(#loc3)), %arg1: tensor<8x128xf32> loc(\"y\")) -> (tensor<8x128xf32> {mhlo.layout_mode = \"default\"}) {\n"...)
		b = append(b, "    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32> loc(#loc)\n"...)
		b = append(b, "    %cst_0 = stablehlo.constant dense<\"0x0000803F000000400000404000008040\"> : tensor<4xf32> loc(#loc)\n"...)
		b = append(b, "    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x128xf32> loc("...)
		b = append(b, l()...)
		b = append(b, ")\n    %1 = stablehlo.add %arg0, %0 : tensor<8x128xf32> loc("...)
		b = append(b, l()...)
		b = append(b, ")\n    %2 = stablehlo.multiply %1, %arg1 : tensor<8x128xf32> loc("...)
		b = append(b, l()...)
		b = append(b, ")\n    %3 = stablehlo.custom_call @annotate_device_placement(%2) {has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = \"device\"}} : (tensor<8x128xf32>) -> tensor<8x128xf32> loc("...)
		b = append(b, l()...)
		b = append(b, ")\n    %4 = stablehlo.custom_call @cu_kernel_ffi(%3) {mhlo.backend_config = {kernel_name = \"k"...)
		b = append(b, ks...)
		b = append(b, "\", opaque = \"x\\9C\\ED[\\DD\\8E\\DB\\B8\\15F\\8A\\BD\\B1\\AEr\\D9K6\\22\"}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>]} : (tensor<8x128xf32>) -> tensor<8x128xf32> loc("...)
		b = append(b, l()...)
		b = append(b, ")\n    %5 = stablehlo.compare  GT, %4, %0 : (tensor<8x128xf32>, tensor<8x128xf32>) -> tensor<8x128xi1> loc(callsite("...)
		b = append(b, l()...)
		b = append(b, " at #loc3))\n    %6 = stablehlo.select %5, %4, %arg0 : tensor<8x128xi1>, tensor<8x128xf32> loc("...)
		b = append(b, l()...)
		b = append(b, ")\n    return %6 : tensor<8x128xf32> loc(#loc)\n  } loc(#loc)\n"...)
		for j := loc - 5; j <= loc; j++ {
			aliases = append(aliases, "#loc"...)
			aliases = strconv.AppendInt(aliases, int64(j+1), 10)
			aliases = append(aliases, " = loc(\"jit(func)/jit(main)/f"...)
			aliases = append(aliases, ks...)
			aliases = append(aliases, "/op\"(\"third_party/py/project/model/layers.py\":"...)
			aliases = strconv.AppendInt(aliases, int64(100+j), 10)
			aliases = append(aliases, ":13))\n"...)
		}
	}
	b = append(b, "} loc(#loc)\n#loc = loc(unknown)\n#loc3 = loc(\"third_party/py/project/train.py\":42:7)\n#loc4 = loc(\"jit(func)/jit(main)/pjit\"(#loc3))\n"...)
	return append(b, aliases...)
}

// GenerateSignature returns a signature JSON around GenerateModule(size), as
// the Python client encodes it (no HTML escaping: '<' and '>' stay as they
// are), with a platform, a jaxlib version and one XLA flag. Benchmarks of
// the canonicalizer, the plugin and the key path share it, so their
// throughputs are comparable.
func GenerateSignature(size int) []byte {
	sig := []byte(`{"backend":"xla","platform":"cuda","jaxlib_version":"0.7.1","xla_flags":["--xla_gpu_autotune_level=2"],"module":`)
	sig = appendJSONString(sig, GenerateModule(size))
	return append(sig, '}')
}
