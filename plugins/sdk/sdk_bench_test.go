package sdk

import "testing"

// BenchmarkAppendResult measures the result JSON of a typical xla call (a
// dozen components, digests and short values), the SDK's per-call work
// besides the plugin's own.
func BenchmarkAppendResult(b *testing.B) {
	r := Result{
		Canonical:   make([]byte, 1<<20),
		DisplayName: "jit_train_step",
		Components: map[string]string{
			"module": "xxh64:0123456789abcdef", "module_format": "stablehlo", "module_bytes": "10485760",
			"platform": "cuda", "platform_version": "12.4", "jaxlib_version": "0.7.1",
			"compile_options": "xxh64:fedcba9876543210", "topology": "", "codec": "",
			"extra": "", "xla_flags": "--xla_gpu_autotune_level=2",
		},
	}
	var out []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		out = AppendResult(out[:0], r, 4096)
	}
}
