package xlacanon

import (
	"bytes"
	"testing"
)

// FuzzCanonicalize feeds arbitrary signatures (seeds in
// testdata/fuzz/FuzzCanonicalize) and checks that canonicalization never
// panics, is deterministic, and that its normal form is a fixed point that
// canonicalizes the same way.
func FuzzCanonicalize(f *testing.F) {
	f.Add([]byte(`{"backend":"xla","platform":"cpu","module":"` + tinyMLIR + `"}`))
	f.Add([]byte(`{"backend":"xla","platform":"cpu","module":"HloModule m\nENTRY e {\n ROOT c = f32[] constant(1), metadata={op_name=\"a}b\"}\n}"}`))
	f.Add([]byte(`{"backend":"xla","platform":"cpu","module_format":"stablehlo","module":"#loc1 = loc(\"x\")\nmodule @m { %0 = a.b {jax.result_info = \"r\"} loc(#loc1) }"}`))
	f.Fuzz(func(t *testing.T, sig []byte) {
		var c1, c2 Canonicalizer
		r1, err1 := c1.Canonicalize(sig)
		r2, err2 := c2.Canonicalize(sig)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("non-deterministic error: %v vs %v", err1, err2)
		}
		if err1 != nil {
			return
		}
		if !bytes.Equal(r1.Canonical, r2.Canonical) || r1.DisplayName != r2.DisplayName {
			t.Fatal("non-deterministic result")
		}
		canon := append([]byte(nil), r1.Canonical...)
		norm, err := c1.Normalize(sig)
		if err != nil {
			t.Fatalf("normalize failed after canonicalize succeeded: %v", err)
		}
		norm = append([]byte(nil), norm...)
		r3, err := c2.Canonicalize(norm)
		if err != nil {
			t.Fatalf("canonicalize(normalize(s)) failed: %v\n%q", err, norm)
		}
		if !bytes.Equal(r3.Canonical, canon) {
			t.Fatalf("canonicalize(normalize(s)) != canonicalize(s)\n%q\n%q", r3.Canonical, canon)
		}
		norm2, err := c2.Normalize(norm)
		if err != nil || !bytes.Equal(norm2, norm) {
			t.Fatalf("normalize not idempotent: %v", err)
		}
	})
}

// FuzzCanonicalModule fuzzes the module scanners directly (no JSON layer).
func FuzzCanonicalModule(f *testing.F) {
	f.Add([]byte("module @m { %0 = \"x\"() : () -> () loc(\"a\\\"b\"(#loc)) }"), false)
	f.Add([]byte("HloModule m\nFileNames\n1 \"a\"\nENTRY e { c = f32[] constant(1), metadata={op_name=\"}\"} }"), true)
	f.Fuzz(func(t *testing.T, mod []byte, hlo bool) {
		format := FormatStableHLO
		if hlo {
			format = FormatHLO
		}
		out, _, _, err := CanonicalModule(mod, format)
		if err != nil {
			return
		}
		again, _, _, err := CanonicalModule(out, format)
		if err != nil {
			t.Fatalf("canonical text does not canonicalize: %v\n%q", err, out)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent\n in %q\nout %q\nagain %q", mod, out, again)
		}
	})
}
