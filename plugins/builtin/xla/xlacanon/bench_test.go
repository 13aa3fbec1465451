package xlacanon

import (
	"testing"
)

func benchSignature(b *testing.B, size int) []byte {
	b.Helper()
	mod := GenerateModule(size)
	sig := append([]byte(`{"backend":"xla","platform":"cuda","jaxlib_version":"0.7.1","xla_flags":["--xla_gpu_autotune_level=2"],"module":`), appendJSONString(nil, mod)...)
	return append(sig, '}')
}

func benchCanonicalize(b *testing.B, size int) {
	sig := benchSignature(b, size)
	var c Canonicalizer
	if _, err := c.Canonicalize(sig); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(sig)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Canonicalize(sig); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCanonicalize1MiB measures signature-to-canonical throughput
// (JSON decode, module scan, framing, digests) on a 1 MiB generated module.
func BenchmarkCanonicalize1MiB(b *testing.B) { benchCanonicalize(b, 1<<20) }

// BenchmarkCanonicalize10MiB is the same on a 10 MiB module.
func BenchmarkCanonicalize10MiB(b *testing.B) { benchCanonicalize(b, 10<<20) }

// BenchmarkCanonicalModule10MiB measures the module scanner alone.
func BenchmarkCanonicalModule10MiB(b *testing.B) {
	mod := GenerateModule(10 << 20)
	var c Canonicalizer
	out := make([]byte, 0, len(mod))
	b.SetBytes(int64(len(mod)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		out, _, err = c.canonMLIR(out[:0], mod)
		if err != nil {
			b.Fatal(err)
		}
	}
}
