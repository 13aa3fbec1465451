package xlacanon_test

import (
	"fmt"

	"github.com/cachesvc/cachesvc/plugins/builtin/xla/xlacanon"
)

func ExampleCanonicalize() {
	sig := `{"backend": "xla", "platform": "cuda", "jaxlib_version": "0.7.1",
	  "xla_flags": ["--xla_dump_to=/tmp/dump", "--xla_gpu_autotune_level=2"],
	  "module": "#loc1 = loc(\"x\")\nmodule @jit_f {\n  func.func public @main(%arg0: tensor<i32> loc(\"x\")) -> (tensor<i32> {jax.result_info = \"result\"}) {\n    %c = stablehlo.constant dense<2> : tensor<i32> loc(#loc1)\n    %0 = stablehlo.add %c, %arg0 : tensor<i32> loc(#loc1)\n    return %0 : tensor<i32>\n  }\n}\n"}`
	r, err := xlacanon.Canonicalize([]byte(sig))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.DisplayName)
	fmt.Println(string(r.Module))
	fmt.Println(r.Components["xla_flags"])
	// Output:
	// jit_f
	// module {func.func public @main(%0: tensor<i32>) -> (tensor<i32>) {%1 = stablehlo.constant dense<2> : tensor<i32> %2 = stablehlo.add %1, %0 : tensor<i32> return %2 : tensor<i32>}}
	// --xla_gpu_autotune_level=2
}

func ExampleCanonicalModule() {
	hlo := "HloModule jit_f.10, entry_computation_layout={()->f32[]}\n\nENTRY %main () -> f32[] {\n  ROOT %c = f32[] constant(1), metadata={op_name=\"jit(f)/c\" source_file=\"/tmp/a.py\" source_line=3}\n}\n"
	text, name, format, err := xlacanon.CanonicalModule([]byte(hlo), "")
	fmt.Println(string(text), name, format, err)
	// Output:
	// HloModule _, entry_computation_layout={()->f32[]} ENTRY %main () -> f32[] {ROOT %c = f32[] constant(1)} jit_f.10 hlo <nil>
}
