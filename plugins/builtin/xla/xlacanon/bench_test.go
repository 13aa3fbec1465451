package xlacanon

import (
	"strconv"
	"testing"
)

func benchCanonicalize(b *testing.B, size int) {
	sig := GenerateSignature(size)
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

// hloModule returns an HLO module of at least size bytes shaped like JAX
// output with debug info: every instruction carries metadata={...} with a
// stack_frame_id, and the debug tables follow the header.
func hloModule(size int) []byte {
	b := []byte("HloModule jit_f, entry_computation_layout={(f32[8,128]{1,0}, f32[8,128]{1,0})->f32[8,128]{1,0}}\n\n" +
		"FileNames\n1 \"/x/model.py\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n1 {file_name_id=1 function_name_id=1 line=12 end_line=12 column=4 end_column=9}\n\n" +
		"StackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\n")
	for k := 0; len(b) < size; k++ {
		ks := strconv.Itoa(k)
		b = append(b, "%f"+ks+" (p0: f32[8,128], p1: f32[8,128]) -> f32[8,128] {\n"...)
		b = append(b, "  %p0 = f32[8,128]{1,0} parameter(0), metadata={op_name=\"x\"}\n  %p1 = f32[8,128]{1,0} parameter(1)\n"...)
		b = append(b, "  %add."+ks+" = f32[8,128]{1,0} add(f32[8,128]{1,0} %p0, f32[8,128]{1,0} %p1), metadata={op_type=\"add\" op_name=\"jit(f)/jit(main)/add\" source_file=\"/x/model.py\" source_line=12 stack_frame_id=1}\n"...)
		b = append(b, "  %c = f32[] constant(1), metadata={op_type=\"const\" op_name=\"jit(f)/jit(main)/c\" source_file=\"/x/model.py\" source_line=13}\n"...)
		b = append(b, "  %b = f32[8,128]{1,0} broadcast(f32[] %c), dimensions={}, metadata={op_type=\"broadcast_in_dim\" op_name=\"jit(f)/jit(main)/broadcast_in_dim\" source_file=\"/x/model.py\" source_line=13}\n"...)
		b = append(b, "  ROOT %m = f32[8,128]{1,0} multiply(f32[8,128]{1,0} %add."+ks+", f32[8,128]{1,0} %b), /*index=0*/ metadata={op_type=\"mul\" op_name=\"jit(f)/jit(main)/mul\" source_file=\"/x/model.py\" source_line=14}\n}\n\n"...)
	}
	return b
}

// BenchmarkCanonicalHLO10MiB measures the HLO scanner alone.
func BenchmarkCanonicalHLO10MiB(b *testing.B) {
	mod := hloModule(10 << 20)
	out := make([]byte, 0, len(mod))
	b.SetBytes(int64(len(mod)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		out, _, err = canonHLO(out[:0], mod)
		if err != nil {
			b.Fatal(err)
		}
	}
}
