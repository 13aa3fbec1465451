package pt2sig

import (
	"strings"
	"testing"
)

// Keys as torch 2.15 and Triton 3.9 send them to Redis.
const (
	fxKey       = "pt2:fx-graph-v1::fk5sdq3zvq2hztgoxzf6m7q4ouyw3fpldd7bmlz4ixu7yxtqsxlm:c1"
	aotKey      = "pt2:autograd-experimental::acbxt6o3ou2hj7rk5pxm3cfqvmkzvd5lgj7v5k6qwxlkclf7mz4k:c1"
	autotuneKey = "pt2:9b1f0c2d4e5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5::triton_poi_fused_add_0:c1"
	tritonKey   = "triton:AB12CD34EF56:add_kernel.cubin"
)

func TestCanonicalize(t *testing.T) {
	cases := []struct {
		name, sig     string
		canonical     string
		kind, display string
		comps         map[string]string
	}{
		{"resp fx graph", `{"backend":"pt2","key":"` + fxKey + `"}`, fxKey, KindFxGraph,
			"fxgraph fk5sdq3zvq2hztgo…", nil},
		{"bare fx graph with cache", `{"backend":"pt2","cache":"fx-graph-v1","key":"fk5sdq3zvq2hztgoxzf6m7q4ouyw3fpldd7bmlz4ixu7yxtqsxlm"}`,
			fxKey, KindFxGraph, "fxgraph fk5sdq3zvq2hztgo…", nil},
		{"bare with explicit format", `{"backend":"pt2","cache":"fx-graph-v1","format":"c1","key":"fk5sdq3zvq2hztgoxzf6m7q4ouyw3fpldd7bmlz4ixu7yxtqsxlm"}`,
			fxKey, KindFxGraph, "fxgraph fk5sdq3zvq2hztgo…", nil},
		{"aot autograd", `{"backend":"pt2","key":"` + aotKey + `"}`, aotKey, KindAOTAutograd, "aotautograd acbxt6o3ou2hj7rk…", nil},
		{"autotune digest cache id", `{"backend":"pt2","key":"` + autotuneKey + `"}`, autotuneKey, KindAutotune,
			"autotune triton_poi_fused…", nil},
		{"bundled autotune", `{"backend":"pt2","key":"pt2:bundled-autotune-v1::k1:c1"}`, "pt2:bundled-autotune-v1::k1:c1", KindBundledAutotune, "bundled-autotune k1", nil},
		{"dynamo pgo", `{"backend":"pt2","key":"pt2:dynamo-pgo::code-state:c1"}`, "pt2:dynamo-pgo::code-state:c1", KindPGO, "pgo code-state", nil},
		{"inductor cpp library", `{"backend":"pt2","cache":"inductor-cpp","key":"0123456789abcdef0123","torch_version":"2.15.0","device":"cpu"}`,
			"pt2:inductor-cpp::0123456789abcdef0123:c1", KindCpp, "cpp 0123456789abcdef…", map[string]string{"torch_version": "2.15.0", "device": "cpu"}},
		{"triton", `{"backend":"pt2","key":"` + tritonKey + `"}`, tritonKey, KindTriton, "triton AB12CD34EF56:add…", nil},
		{"components and name", `{"backend":"pt2","key":"` + fxKey + `","name":"forward","torch_version":"2.15.0","device":"cpu","graph":"ab12","inductor_config":"cd34"}`,
			fxKey, KindFxGraph, "forward", map[string]string{"torch_version": "2.15.0", "device": "cpu", "graph": "ab12", "inductor_config": "cd34"}},
		{"empty component omitted", `{"backend":"pt2","key":"` + fxKey + `","triton_version":""}`, fxKey, KindFxGraph, "fxgraph fk5sdq3zvq2hztgo…", nil},
		{"mega", `{"backend":"pt2","cache":"mega","key":"sweep-7","torch_version":"2.15.0","device":"cpu"}`,
			"mega::sweep-7\x002.15.0\x00cpu\x00\x00", KindMega, "mega sweep-7", map[string]string{"torch_version": "2.15.0", "device": "cpu"}},
		{"mega with gpu", `{"backend":"pt2","cache":"mega","key":"r","torch_version":"2.15.0","device":"cuda","triton_version":"3.9.0","device_capability":"9.0"}`,
			"mega::r\x002.15.0\x00cuda\x003.9.0\x009.0", KindMega, "mega r",
			map[string]string{"torch_version": "2.15.0", "device": "cuda", "triton_version": "3.9.0", "device_capability": "9.0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Canonicalize([]byte(tc.sig))
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Canonical) != tc.canonical {
				t.Errorf("canonical %q, want %q", r.Canonical, tc.canonical)
			}
			if r.DisplayName != tc.display {
				t.Errorf("display %q, want %q", r.DisplayName, tc.display)
			}
			if r.Components["cache"] != tc.kind {
				t.Errorf("cache component %q, want %q", r.Components["cache"], tc.kind)
			}
			if len(r.Components) != len(tc.comps)+1 {
				t.Errorf("components %v, want cache plus %v", r.Components, tc.comps)
			}
			for k, v := range tc.comps {
				if r.Components[k] != v {
					t.Errorf("component %s = %q, want %q", k, r.Components[k], v)
				}
			}
			// Normal form: a fixed point with the same canonical bytes.
			n, err := Canonicalize(r.Normal)
			if err != nil {
				t.Fatalf("normal form %s: %v", r.Normal, err)
			}
			if string(n.Canonical) != string(r.Canonical) || string(n.Normal) != string(r.Normal) {
				t.Errorf("normal form %s is not a fixed point: %q vs %q", r.Normal, n.Canonical, r.Canonical)
			}
		})
	}
}

// TestComponentsNeverSplitKeys: what torch keeps apart stays apart, and the
// optional fields (which only explain misses) never change the key.
func TestComponentsNeverSplitKeys(t *testing.T) {
	base := `{"backend":"pt2","key":"` + fxKey + `"`
	a, _ := Canonicalize([]byte(base + `}`))
	b, _ := Canonicalize([]byte(base + `,"torch_version":"2.15.0","graph":"x","other":"y","name":"n"}`))
	if string(a.Canonical) != string(b.Canonical) {
		t.Errorf("components changed the canonical bytes")
	}
	distinct := []string{
		fxKey,
		strings.Replace(fxKey, "fx-graph-v1", "autograd-experimental", 1),
		strings.Replace(fxKey, ":c1", ":c2", 1),
		strings.Replace(fxKey, "fk5s", "fk5t", 1),
		"pt2:fx-graph-v1::fk5sdq3zvq2hztgoxzf6m7q4ouyw3fpldd7bmlz4ixu7yxtqsxlm:c10",
	}
	seen := map[string]string{}
	for _, k := range distinct {
		r, err := Canonicalize([]byte(`{"backend":"pt2","key":"` + k + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[string(r.Canonical)]; ok {
			t.Errorf("%s and %s merged", prev, k)
		}
		seen[string(r.Canonical)] = k
	}
	m1, _ := Canonicalize([]byte(`{"backend":"pt2","cache":"mega","key":"r","torch_version":"2.15.0","device":"cpu"}`))
	m2, _ := Canonicalize([]byte(`{"backend":"pt2","cache":"mega","key":"r","torch_version":"2.15.1","device":"cpu"}`))
	m3, _ := Canonicalize([]byte(`{"backend":"pt2","cache":"mega","key":"r","torch_version":"2.15.0","device":"cpu","device_capability":"9.0"}`))
	if string(m1.Canonical) == string(m2.Canonical) || string(m1.Canonical) == string(m3.Canonical) {
		t.Errorf("Mega-Cache keys of different environments merged")
	}
}

func TestCanonicalizeErrors(t *testing.T) {
	long := strings.Repeat("k", MaxKeyBytes+1)
	cases := []struct{ name, sig, want string }{
		{"not json", `pt2`, "signature is not a JSON object"},
		{"array", `[]`, "signature is not a JSON object"},
		{"wrong backend", `{"backend":"xla","key":"` + fxKey + `"}`, `field backend is "xla"`},
		{"no backend", `{"key":"` + fxKey + `"}`, `field backend is ""`},
		{"unknown field", `{"backend":"pt2","key":"` + fxKey + `","colour":"red"}`, `unknown field "colour"`},
		{"number field", `{"backend":"pt2","key":"` + fxKey + `","device":7}`, `field "device" must be a string`},
		{"no key", `{"backend":"pt2"}`, "field key is required"},
		{"key too long", `{"backend":"pt2","cache":"fx-graph-v1","key":"` + long + `"}`, "field key is 4097 bytes"},
		{"control byte", `{"backend":"pt2","key":"pt2:fx-graph-v1::a\tb:c1"}`, "field key has byte 0x09 at offset 18"},
		{"non ascii", `{"backend":"pt2","key":"` + fxKey + `","device":"gpü"}`, "field device has byte 0xc3"},
		{"field too long", `{"backend":"pt2","key":"` + fxKey + `","graph":"` + strings.Repeat("g", 257) + `"}`, "field graph is 257 bytes"},
		{"bare without cache", `{"backend":"pt2","key":"fk5s"}`, "a bare key needs field cache"},
		{"no cache id", `{"backend":"pt2","key":"pt2:fk5s:c1"}`, "lacks its cache id"},
		{"empty cache id", `{"backend":"pt2","key":"pt2:::fk5s:c1"}`, "lacks its cache id"},
		{"no format", `{"backend":"pt2","key":"pt2:fx-graph-v1::fk5s"}`, `does not end in a format such as ":c1"`},
		{"bad format", `{"backend":"pt2","key":"pt2:fx-graph-v1::fk5s:v1"}`, `does not end in a format`},
		{"empty inner key", `{"backend":"pt2","key":"pt2:fx-graph-v1:::c1"}`, `does not end in a format`},
		{"cache mismatch", `{"backend":"pt2","cache":"autograd-v1","key":"` + fxKey + `"}`, `field cache is "autograd-v1" but the key names cache id "fx-graph-v1"`},
		{"format mismatch", `{"backend":"pt2","format":"c2","key":"` + fxKey + `"}`, `field format is "c2" but the key ends in format "c1"`},
		{"bare bad format", `{"backend":"pt2","cache":"fx-graph-v1","format":"1","key":"k"}`, `torch's formats are c1, c2`},
		{"cache with separator", `{"backend":"pt2","cache":"a::b","key":"k"}`, `contains "::"`},
		{"triton with cache", `{"backend":"pt2","cache":"x","key":"` + tritonKey + `"}`, "do not apply to a Triton key"},
		{"triton empty", `{"backend":"pt2","key":"triton:"}`, "nothing after the prefix"},
		{"mega without torch", `{"backend":"pt2","cache":"mega","key":"r","device":"cpu"}`, "needs field torch_version"},
		{"mega without device", `{"backend":"pt2","cache":"mega","key":"r","torch_version":"2.15.0"}`, "needs field device"},
		{"mega with format", `{"backend":"pt2","cache":"mega","format":"c1","key":"r","torch_version":"2.15.0","device":"cpu"}`, "format does not apply"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Canonicalize([]byte(tc.sig))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
