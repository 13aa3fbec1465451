package keying

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/plugins/pluginstest"
)

// FuzzKey feeds arbitrary bytes as a signature through the real built-in
// plugins (passthrough, xla) in wazero. Properties: Key never panics; it
// fails only with an *Error of a known kind; and it is deterministic — with
// the memo off, the plugin runs again on the same bytes and gives the same
// key.
func FuzzKey(f *testing.F) {
	mlir := "module @jit_f attributes {mhlo.num_partitions = 1 : i32} {\n" +
		"  func.func public @main(%arg0: tensor<2xf32> loc(\"x\")) -> (tensor<2xf32> {jax.result_info = \"\"}) {\n" +
		"    %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32> loc(#loc1)\n" +
		"    return %0 : tensor<2xf32>\n  }\n}\n#loc1 = loc(\"f.py\":3:0)\n"
	xla, _ := json.Marshal(map[string]any{"backend": "xla", "module": mlir, "platform": "cpu",
		"jaxlib_version": "0.4.38", "xla_flags": []string{"--xla_cpu_enable_fast_math=false"}})
	for _, s := range []string{
		`{"backend":"passthrough","kind":"jax","key":"jit_f-0a1b"}`,
		`{"backend":"passthrough","kind":"jax"}`,
		`{"backend":"xla","module":"HloModule m\n\nENTRY e { ROOT p = f32[] parameter(0) }","platform":"cpu"}`,
		string(xla),
		`{"backend":"xla","module_b64":"TUzvUg==","platform":"tpu"}`,
		`{"backend":7}`, `[]`, `{"backend":"passthrough","backend":"xla"}`, "{\"backend\":\"xla\",\"module\":\"\\ud800\"}",
	} {
		f.Add([]byte(s))
	}
	ctx := context.Background()
	h, err := plugins.NewHost(ctx, plugins.Config{CacheDir: pluginstest.CacheDir(f), CallTimeout: 5 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { h.Close(context.Background()) })
	if err := h.LoadBuiltins(ctx); err != nil {
		f.Fatal(err)
	}
	k, err := New(Config{Host: h, MaxSignatureBytes: 1 << 20, MemoEntries: -1})
	if err != nil {
		f.Fatal(err)
	}
	kinds := []error{ErrMalformed, ErrTooLarge, ErrUnknownBackend, ErrPluginError, ErrPluginFailed, ErrPluginBusy}
	f.Fuzz(func(t *testing.T, sig []byte) {
		res, err := k.Key(ctx, sig)
		if err != nil {
			var ke *Error
			if !errors.As(err, &ke) {
				t.Fatalf("Key(%q): error %v is not a *keying.Error", sig, err)
			}
			known := false
			for _, kind := range kinds {
				known = known || errors.Is(err, kind)
			}
			if !known || ke.Message == "" {
				t.Fatalf("Key(%q): error of unknown kind or without message: %v", sig, err)
			}
			return
		}
		again, err := k.Key(ctx, sig)
		if err != nil || again.Key != res.Key || again.Plugin != res.Plugin {
			t.Fatalf("Key(%q) not deterministic: %s then %s (%v)", sig, res.Key, again.Key, err)
		}
	})
}
