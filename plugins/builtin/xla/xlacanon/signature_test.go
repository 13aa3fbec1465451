package xlacanon

import (
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const tinyMLIR = `module @jit_f {\n  func.func public @main(%arg0: tensor<i32>) -> tensor<i32> {\n    return %arg0 : tensor<i32>\n  }\n}\n`

func TestSignatureErrors(t *testing.T) {
	tests := []struct {
		name, sig, want string
	}{
		{"not an object", `[1]`, "JSON object"},
		{"empty", ``, "JSON object"},
		{"trailing data", `{"backend":"xla","platform":"cpu","module":"` + tinyMLIR + `"} x`, "unexpected data"},
		{"unknown field", `{"backend":"xla","platform":"cpu","module":"` + tinyMLIR + `","modul":"x"}`, `unknown field "modul"`},
		{"duplicate field", `{"backend":"xla","platform":"cpu","platform":"tpu","module":"` + tinyMLIR + `"}`, `duplicate field "platform"`},
		{"missing backend", `{"platform":"cpu","module":"` + tinyMLIR + `"}`, `missing field "backend"`},
		{"wrong backend", `{"backend":"torch","platform":"cpu","module":"` + tinyMLIR + `"}`, `backend is "torch"`},
		{"missing module", `{"backend":"xla","platform":"cpu"}`, `missing field "module"`},
		{"empty module", `{"backend":"xla","platform":"cpu","module":""}`, "module is empty"},
		{"both modules", `{"backend":"xla","platform":"cpu","module":"x","module_b64":"eA=="}`, "not both"},
		{"missing platform", `{"backend":"xla","module":"` + tinyMLIR + `"}`, `missing field "platform"`},
		{"bad format", `{"backend":"xla","platform":"cpu","module_format":"onnx","module":"` + tinyMLIR + `"}`, `module_format "onnx"`},
		{"format mismatch", `{"backend":"xla","platform":"cpu","module_format":"hlo","module":"` + tinyMLIR + `"}`, "looks like stablehlo"},
		{"undetectable", `{"backend":"xla","platform":"cpu","module":"hello"}`, "set module_format"},
		{"bad base64", `{"backend":"xla","platform":"cpu","module_b64":"***"}`, "base64"},
		{"bytecode as text", `{"backend":"xla","platform":"cpu","module_format":"mlir_bytecode","module":"` + tinyMLIR + `"}`, "looks like stablehlo"},
		{"flags not a list", `{"backend":"xla","platform":"cpu","xla_flags":"--a","module":"` + tinyMLIR + `"}`, "list of strings"},
		{"flag without dash", `{"backend":"xla","platform":"cpu","xla_flags":["--xla_a","2"],"module":"` + tinyMLIR + `"}`, `entry "2" is not a flag`},
		{"number for string", `{"backend":"xla","platform":1,"module":"` + tinyMLIR + `"}`, "expected a JSON string"},
		{"bad extra", `{"backend":"xla","platform":"cpu","extra":{"a":},"module":"` + tinyMLIR + `"}`, `"extra" is not valid JSON`},
		{"bad escape", `{"backend":"xla","platform":"cpu","module":"\q"}`, `bad escape`},
		{"lone surrogate", `{"backend":"xla","platform":"cpu","module":"\ud800x"}`, "surrogate"},
		{"invalid utf8", "{\"backend\":\"xla\",\"platform\":\"cpu\",\"module\":\"module {\xff}\"}", "UTF-8"},
		{"unterminated", `{"backend":"xla","platform":"cpu","module":"abc`, "unterminated"},
		{"nothing but debug info", `{"backend":"xla","platform":"cpu","module_format":"stablehlo","module":"#loc = loc(unknown)\n// c\n"}`, "empty after removing"},
		{"bad module text", `{"backend":"xla","platform":"cpu","module":"module { x = \"abc }"}`, "unterminated string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Canonicalize([]byte(tt.sig))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrSignature) && !errors.Is(err, ErrModule) {
				t.Errorf("error %v wraps no sentinel", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestNormalizeFlags(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"sorted by name", []string{"--xla_b=1", "--xla_a=2"}, []string{"--xla_a=2", "--xla_b=1"}},
		{"one XLA_FLAGS string", []string{"  --xla_b=1\t--xla_a=2 "}, []string{"--xla_a=2", "--xla_b=1"}},
		{"bare bool is =true", []string{"--xla_gpu_enable_x"}, []string{"--xla_gpu_enable_x=true"}},
		{"dump and path flags dropped", []string{"--xla_dump_to=/tmp", "--xla_dump_hlo_as_text", "--xla_gpu_cuda_data_dir=/usr/cuda",
			"--xla_force_host_platform_device_count=8", "--xla_gpu_per_fusion_autotune_cache_dir=/c", "--xla_gpu_experimental_autotune_cache_mode=update",
			"--xla_tpu_sdc_checker_streamz_metric=1", "--xla_tpu_compiler_variant=x", "--xla_keep=1"}, []string{"--xla_keep=1"}},
		{"repeats keep their order", []string{"--xla_z=1", "--xla_a=2", "--xla_a=1"}, []string{"--xla_a=2", "--xla_a=1", "--xla_z=1"}},
		{"values kept verbatim", []string{"--xla_a=B c", "--xla_b="}, []string{"--xla_a=B", "--xla_b="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := normalizeFlags(tt.in)
			if tt.name == "values kept verbatim" {
				// "c" is a separate whitespace-split entry and not a flag.
				if err == nil {
					t.Fatal("want an error for a stray value")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCanonicalizeResult(t *testing.T) {
	sig := `{"backend":"xla","module":"` + tinyMLIR + `","platform":"cuda","platform_version":"12.4","jaxlib_version":"0.7.1",` +
		`"xla_flags":["--xla_b=1","--xla_dump_to=/x","--xla_a"],"compile_options":"abc","topology":["TPU v4","TPU v4"],"codec":"zstandard","extra":{ "k" : 1 }}`
	r, err := Canonicalize([]byte(sig))
	if err != nil {
		t.Fatal(err)
	}
	if r.DisplayName != "jit_f" {
		t.Errorf("display name %q", r.DisplayName)
	}
	wantMod := `module {func.func public @main(%0: tensor<i32>) -> tensor<i32> {return %0 : tensor<i32>}}`
	if string(r.Module) != wantMod {
		t.Errorf("module %q", r.Module)
	}
	want := map[string]string{
		"module": digest([]byte(wantMod)), "module_format": "stablehlo", "module_bytes": "89",
		"platform": "cuda", "platform_version": "12.4", "jaxlib_version": "0.7.1", "compile_options": "abc",
		"topology": `["TPU v4","TPU v4"]`, "codec": "zstandard", "extra": `{"k":1}`, "xla_flags": "--xla_a=true --xla_b=1",
	}
	if !reflect.DeepEqual(r.Components, want) {
		t.Errorf("components\n got %v\nwant %v", r.Components, want)
	}
	if !strings.HasPrefix(string(r.Canonical), canonicalMagic+"module_format 9\nstablehlo\nplatform 4\ncuda\n") ||
		!strings.HasSuffix(string(r.Canonical), "module 00000000000000000089\n"+wantMod+"\n") {
		t.Errorf("canonical record framing:\n%s", r.Canonical)
	}
	// Field order in the JSON does not matter; null means absent.
	sig2 := `{"extra":{"k":1},"codec":"zstandard","topology":["TPU v4","TPU v4"],"compile_options":"abc","xla_flags":["--xla_a=true","--xla_b=1"],` +
		`"jaxlib_version":"0.7.1","platform_version":"12.4","platform":"cuda","module_format":"stablehlo","module":"` + strings.ReplaceAll(tinyMLIR, "jit_f", "jit_g") + `","backend":"xla"}`
	r2, err := Canonicalize([]byte(sig2))
	if err != nil {
		t.Fatal(err)
	}
	if string(r2.Canonical) != string(r.Canonical) {
		t.Error("reordered signature changed the canonical record")
	}
	n1, _ := Canonicalize([]byte(`{"backend":"xla","platform":"cpu","codec":null,"module":"` + tinyMLIR + `"}`))
	n2, _ := Canonicalize([]byte(`{"backend":"xla","platform":"cpu","module":"` + tinyMLIR + `"}`))
	if string(n1.Canonical) != string(n2.Canonical) {
		t.Error("null field differs from an absent one")
	}
	long := strings.Repeat("x", 200)
	r3, err := Canonicalize([]byte(`{"backend":"xla","platform":"cpu","compile_options":"` + long + `","module":"` + tinyMLIR + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := r3.Components["compile_options"]; got != digest([]byte(long)) {
		t.Errorf("long value component %q, want its digest", got)
	}
}

func TestModuleB64(t *testing.T) {
	text := strings.ReplaceAll(tinyMLIR, `\n`, "\n")
	b64 := base64.StdEncoding.EncodeToString([]byte(text))
	a, err := Canonicalize([]byte(`{"backend":"xla","platform":"cpu","module_b64":"` + b64 + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Canonicalize([]byte(`{"backend":"xla","platform":"cpu","module":"` + tinyMLIR + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Canonical) != string(b.Canonical) {
		t.Error("module_b64 text and module text differ")
	}
	bc := base64.StdEncoding.EncodeToString([]byte("ML\xefR\x00\x01binary"))
	var c Canonicalizer
	r, err := c.Canonicalize([]byte(`{"backend":"xla","platform":"cpu","module_b64":"` + bc + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Components["module_format"] != FormatMLIRBytecode || string(r.Module) != "ML\xefR\x00\x01binary" {
		t.Errorf("bytecode not kept verbatim: %q %q", r.Components["module_format"], r.Module)
	}
	canon := append([]byte(nil), r.Canonical...)
	norm, err := c.Normalize([]byte(`{"backend":"xla","platform":"cpu","module_b64":"` + bc + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Canonicalize(norm)
	if err != nil || string(r2.Canonical) != string(canon) {
		t.Errorf("bytecode normalize round trip failed: %v", err)
	}
}
