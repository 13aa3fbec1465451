package xlacanon

import (
	"testing"
	"unicode/utf8"
)

// The benchmarks below time the phases of Canonicalize other than the module
// scan (BenchmarkCanonicalModule10MiB) one at a time on the 10 MiB generated
// signature, so that a change to one phase can be measured without the noise
// of the others, under wasm as well as natively.

var (
	benchSinkU64  uint64
	benchSinkBool bool
)

// BenchmarkParse10MiB measures parse alone: the JSON decode of the module
// string, its UTF-8 check and format detection.
func BenchmarkParse10MiB(b *testing.B) {
	sig := GenerateSignature(10 << 20)
	var c Canonicalizer
	if _, err := c.parse(sig); err != nil { // size the buffers
		b.Fatal(err)
	}
	b.SetBytes(int64(len(sig)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.parse(sig); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkXXH64_10MiB measures the module digest.
func BenchmarkXXH64_10MiB(b *testing.B) {
	mod := GenerateModule(10 << 20)
	b.SetBytes(int64(len(mod)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchSinkU64 = xxh64(mod)
	}
}

// BenchmarkUTF8Valid10MiB measures utf8.Valid over the module, the check
// parse skips when the decode copied no byte >= 0x80.
func BenchmarkUTF8Valid10MiB(b *testing.B) {
	mod := GenerateModule(10 << 20)
	b.SetBytes(int64(len(mod)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchSinkBool = utf8.Valid(mod)
	}
}

// BenchmarkParseFirstCall10MiB measures parse on a fresh Canonicalizer, as
// on a plugin instance's first call: buffer sizing included.
func BenchmarkParseFirstCall10MiB(b *testing.B) {
	sig := GenerateSignature(10 << 20)
	b.SetBytes(int64(len(sig)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var c Canonicalizer
		if _, err := c.parse(sig); err != nil {
			b.Fatal(err)
		}
	}
}
