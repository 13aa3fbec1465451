package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/keying"
)

// TestAPIKeysCorpus posts corpus signatures to POST /v1/{ns}/keys of a real
// server (listening socket, Badger store, the built-in wasm plugin): the
// SOURCES.md groups share a key, the negative pairs do not, and malformed
// signatures get precise errors.
func TestAPIKeysCorpus(t *testing.T) {
	loadWasm(t)
	k, err := keying.New(keying.Config{Host: loadedHost})
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Keyer = k }})
	dir := corpus(t)
	post := func(body []byte) (int, map[string]any) {
		t.Helper()
		resp := srv.Do(http.MethodPost, srv.URL+"/v1/default/keys", bytes.NewReader(body), "Content-Type", "application/json")
		var out map[string]any
		if err := json.Unmarshal(apitest.ReadAll(t, resp), &out); err != nil {
			t.Fatalf("response is not JSON: %v", err)
		}
		return resp.StatusCode, out
	}
	keyFor := func(rel string) string {
		t.Helper()
		m, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		status, out := post(signature(t, m, "cuda"))
		if status != http.StatusOK {
			t.Fatalf("%s: status %d: %v", rel, status, out)
		}
		if out["plugin"] != "xla@"+Version || out["backend"] != "xla" {
			t.Errorf("%s: response %v", rel, out)
		}
		return out["key"].(string)
	}
	const a = "stablehlo/jax_annotate_data_placement__data_"
	for _, g := range [][]string{
		{a + "2025_04_07_tpu_gspmd.mlir", a + "2025_04_07_cuda_gspmd.mlir", a + "2025_06_30_cuda_gspmd.mlir"},
		{a + "2025_06_30_tpu_shardy.mlir", a + "2025_06_30_cuda_shardy.mlir"},
		{"hlo/jaxdocs_cog_2023-06-02_pjit_rms_norm_bf16_crlf.hlo", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo"},
		{"stablehlo/jaxdocs_aot_2024-06-21_jit_f_layout_mode.mlir", "stablehlo/jaxdocs_aot_2025-02-11_jit_f.mlir", "stablehlo/jaxdocs_aot_2025-05-01_jit_f.mlir"},
	} {
		want := keyFor(g[0])
		for _, f := range g[1:] {
			if got := keyFor(f); got != want {
				t.Errorf("%s and %s: keys %s and %s", g[0], f, want, got)
			}
		}
	}
	for _, p := range [][2]string{
		{"stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f32.mlir", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f64.mlir"},
		{"hlo/jaxdocs_cog_2022-12-16_pjit_rms_norm_f16.hlo", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo"},
		{"stablehlo/jaxdocs_aot_2025-05-01_jit_f.mlir", "stablehlo/jaxdocs_aot_2025-05-01_jit_f_static_arg7.mlir"},
		{a + "2025_04_07_tpu_gspmd.mlir", a + "2025_06_30_tpu_gspmd.mlir"},
	} {
		if keyFor(p[0]) == keyFor(p[1]) {
			t.Errorf("%s and %s share a key", p[0], p[1])
		}
	}
	// The plugin's own errors reach the client as 422 with its message.
	for _, tt := range []struct{ body, want string }{
		{`{"backend":"xla","platform":"cpu","module":"module {}","modul":1}`, `unknown field`},
		{`{"backend":"xla","module":"module {}"}`, `missing field`},
		{`{"backend":"xla","platform":"cpu","module":"module { x = \"abc }"}`, `unterminated string`},
	} {
		status, out := post([]byte(tt.body))
		msg, _ := json.Marshal(out)
		if status != http.StatusUnprocessableEntity || !strings.Contains(string(msg), tt.want) {
			t.Errorf("%s: status %d body %s, want 422 mentioning %q", tt.body, status, msg, tt.want)
		}
	}
}
