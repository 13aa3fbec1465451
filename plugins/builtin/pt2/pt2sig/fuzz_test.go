package pt2sig

import (
	"bytes"
	"testing"
)

// FuzzCanonicalize: any input either fails cleanly or canonicalizes, and
// then its normal form canonicalizes to the same bytes (idempotence).
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"backend":"pt2","key":"` + fxKey + `"}`,
		`{"backend":"pt2","cache":"fx-graph-v1","key":"k","graph":"g"}`,
		`{"backend":"pt2","key":"` + tritonKey + `"}`,
		`{"backend":"pt2","cache":"mega","key":"r","torch_version":"2.15.0","device":"cpu"}`,
		`{"backend":"pt2","key":"pt2:a::b::c:c1"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := Canonicalize(in)
		if err != nil {
			return
		}
		n, err := Canonicalize(r.Normal)
		if err != nil {
			t.Fatalf("normal form %q of %q fails: %v", r.Normal, in, err)
		}
		if !bytes.Equal(n.Canonical, r.Canonical) {
			t.Fatalf("normal form changes canonical bytes: %q vs %q", n.Canonical, r.Canonical)
		}
		if r.Components["cache"] == "" {
			t.Fatalf("no cache component for %q", in)
		}
	})
}
