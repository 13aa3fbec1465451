package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/plugins/pluginstest"
)

// corpusDir is the shared corpus of StableHLO and HLO modules (SOURCES.md).
func corpusDir(t *testing.T) string {
	dir := os.Getenv("CACHESVC_CORPUS")
	if dir == "" {
		dir = "/work/shared/corpus"
	}
	if _, err := os.Stat(filepath.Join(dir, "SOURCES.md")); err != nil {
		t.Skipf("corpus not found at %s (set CACHESVC_CORPUS)", dir)
	}
	return dir
}

// startServe runs `cachesvc serve` in-process on a free port with args and
// returns its URL; the server stops when the test ends.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	all := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"), "--log-format", "json"}, args...)
	go func() { exited <- run(ctx, all, strings.NewReader(""), &stdout, &stderr) }()
	url := waitURL(t, &stdout, exited)
	t.Cleanup(func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("serve exited %d: %s", code, stderr.String())
		}
	})
	return url
}

func postJSON(t *testing.T, url string, body []byte) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return resp.StatusCode, m
}

// keyLines runs `cachesvc key --json args...` and returns file → key.
func keyLines(t *testing.T, args ...string) map[string]keyOutput {
	t.Helper()
	code, out, errOut := runCmd(t, append([]string{"key", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("cachesvc key: exit %d: %s", code, errOut)
	}
	res := map[string]keyOutput{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var k keyOutput
		if err := json.Unmarshal(sc.Bytes(), &k); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		res[k.File] = k
	}
	return res
}

// xlaFlags are the bare-module flags used for the corpus; sigFields is the
// same as signature fields.
var (
	xlaFlags  = []string{"--platform", "cpu", "--platform-version", "cpu-1", "--jaxlib-version", "0.7.1", "--xla-flag", "--xla_cpu_enable_fast_math=false"}
	sigFields = map[string]any{"backend": "xla", "platform": "cpu", "platform_version": "cpu-1", "jaxlib_version": "0.7.1", "xla_flags": []string{"--xla_cpu_enable_fast_math=false"}}
)

const (
	annot = "stablehlo/jax_annotate_data_placement__data_"
	aot   = "stablehlo/jaxdocs_aot_"
)

// corpusMatch are SOURCES.md's groups that must share a key (and the
// team's policy group P1); corpusDiffer its pairs that must stay apart.
var (
	corpusMatch = [][]string{
		{annot + "2025_04_07_tpu_gspmd.mlir", annot + "2025_04_07_cuda_gspmd.mlir", annot + "2025_06_30_cuda_gspmd.mlir"},
		{annot + "2025_06_30_tpu_shardy.mlir", annot + "2025_06_30_cuda_shardy.mlir"},
		{"hlo/jaxdocs_cog_2023-06-02_pjit_rms_norm_bf16_crlf.hlo", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo"},
		{aot + "2024-06-21_jit_f_layout_mode.mlir", aot + "2025-02-11_jit_f.mlir", aot + "2025-05-01_jit_f.mlir"},
	}
	corpusDiffer = [][2]string{
		{"stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f32.mlir", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f64.mlir"},
		{"stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_c64.mlir", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_c128.mlir"},
		{"stablehlo/openxla_stablehlo__add_float32_20_20_float32_20_20.mlir", "stablehlo/openxla_stablehlo__add_bfloat16_20_20_bfloat16_20_20.mlir"},
		{"hlo/jaxdocs_cog_2022-12-16_pjit_rms_norm_f16.hlo", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo"},
		{annot + "2025_06_30_tpu_shardy.mlir", annot + "2026_02_04_rocm_shardy.mlir"},
		{aot + "2025-05-01_jit_f.mlir", aot + "2025-05-01_jit_f_static_arg7.mlir"},
		{annot + "2026_03_24_tpu_shardy.mlir", annot + "2025_04_07_tpu_gspmd.mlir"},
		{"stablehlo/jax_tpu_Sharding__data_2025_06_30_gspmd.mlir", "stablehlo/jax_tpu_Sharding__data_2025_06_30_shardy.mlir"},
		{annot + "2025_04_07_tpu_gspmd.mlir", annot + "2025_06_30_tpu_gspmd.mlir"},
		{"stablehlo/jax_tpu_ApproxTopK__data_2023_04_17.mlir", "stablehlo/jax_tpu_ApproxTopK__data_2023_05_16.mlir"},
	}
)

// TestCorpusKeysCLIAndAPI keys every corpus module through `cachesvc key`
// and through POST /v1/{ns}/keys of a running server: both give the same
// key; SOURCES.md's groups share one key and its negative pairs differ.
func TestCorpusKeysCLIAndAPI(t *testing.T) {
	dir := corpusDir(t)
	t.Setenv("CACHESVC_WASM_CACHE", pluginstest.CacheDir(t))
	var files []string
	for _, sub := range []string{"stablehlo", "hlo"} {
		m, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
		files = append(files, m...)
	}
	cli := keyLines(t, append(append([]string{}, xlaFlags...), files...)...)
	url := startServe(t)
	key := map[string]string{} // corpus-relative name → key
	for _, f := range files {
		mod, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sig := map[string]any{"module": string(mod)}
		for k, v := range sigFields {
			sig[k] = v
		}
		body, _ := json.Marshal(sig)
		code, resp := postJSON(t, url+"/v1/default/keys", body)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %v", f, code, resp)
		}
		rel, _ := filepath.Rel(dir, f)
		key[rel] = resp["key"].(string)
		if c := cli[f]; c.Key != key[rel] || c.Plugin != resp["plugin"] || c.DisplayName != resp["display_name"] {
			t.Errorf("%s: CLI %s %s %q, API %s %v %v", rel, c.Key, c.Plugin, c.DisplayName, key[rel], resp["plugin"], resp["display_name"])
		}
	}
	for _, group := range corpusMatch {
		for _, f := range group[1:] {
			if key[f] == "" || key[f] != key[group[0]] {
				t.Errorf("must share a key: %s (%s) and %s (%s)", group[0], key[group[0]], f, key[f])
			}
		}
	}
	for _, pair := range corpusDiffer {
		if key[pair[0]] == "" || key[pair[0]] == key[pair[1]] {
			t.Errorf("must differ: %s and %s (both %s)", pair[0], pair[1], key[pair[0]])
		}
	}
	// Platform is part of the key although the text is identical.
	other := keyLines(t, "--platform", "tpu", "--platform-version", "cpu-1", "--jaxlib-version", "0.7.1", "--xla-flag", "--xla_cpu_enable_fast_math=false", filepath.Join(dir, corpusMatch[0][0]))
	if k := other[""].Key; k == "" || k == key[corpusMatch[0][0]] {
		t.Errorf("platform tpu vs cpu share key %s", k)
	}
}

// buildExample compiles plugins/examples/cmdline to wasm in dir.
func buildExample(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "cmdline.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-buildmode=c-shared", "-o", out, "../../plugins/examples/cmdline")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build example plugin: %v\n%s", err, b)
	}
	return out
}

// TestExamplePluginEndToEnd builds the example plugin, checks it, loads it
// into a server with --plugins and gets keys from it, equal to the offline
// `cachesvc key --plugins`.
func TestExamplePluginEndToEnd(t *testing.T) {
	pdir := t.TempDir()
	wasm := buildExample(t, pdir)
	t.Setenv("CACHESVC_WASM_CACHE", pluginstest.CacheDir(t, wasm))

	code, out, errOut := runCmd(t, "plugin", "check", wasm, "--corpus", "../../plugins/examples/cmdline/testdata")
	if code != 0 || !strings.Contains(out, "idempotent") || strings.Contains(out, "FAIL") {
		t.Fatalf("plugin check: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "plugin", "list", "--plugins", pdir)
	if code != 0 || !strings.Contains(out, "cmdline@0.1.0") || !strings.Contains(out, "xla@") || !strings.Contains(out, "passthrough@") {
		t.Fatalf("plugin list: exit %d\n%s%s", code, out, errOut)
	}

	sig := "../../plugins/examples/cmdline/testdata/gcc.json"
	offline := keyLines(t, "--plugins", pdir, sig)[""]
	url := startServe(t, "--plugins", pdir)
	body, _ := os.ReadFile(sig)
	status, resp := postJSON(t, url+"/v1/default/keys", body)
	if status != http.StatusOK || resp["key"] != offline.Key || resp["plugin"] != "cmdline@0.1.0" || offline.Key == "" {
		t.Fatalf("keys: %d %v; offline %+v", status, resp, offline)
	}
	// An output path that differs maps to the same key; another flag does not.
	same := bytes.Replace(body, []byte("/tmp/1/a.o"), []byte("/elsewhere/a.o"), 1)
	if _, r := postJSON(t, url+"/v1/default/keys", same); r["key"] != offline.Key {
		t.Errorf("output path changed the key: %v", r)
	}
	diff := bytes.Replace(body, []byte(`"-O2"`), []byte(`"-O3"`), 1)
	if _, r := postJSON(t, url+"/v1/default/keys", diff); r["key"] == offline.Key {
		t.Errorf("-O3 kept the key")
	}
	// The plugin's own errors reach the client.
	status, resp = postJSON(t, url+"/v1/default/keys", []byte(`{"backend":"cmdline","tool":"gcc"}`))
	if e, _ := resp["error"].(map[string]any); status != http.StatusUnprocessableEntity || e["code"] != "plugin_error" {
		t.Fatalf("plugin error: %d %v", status, resp)
	}
}

// TestPluginCheckCatchesNondeterminism runs `plugin check` on the test
// plugin that counts its calls.
func TestPluginCheckCatchesNondeterminism(t *testing.T) {
	wasm := "../../plugins/testdata/nondet.wasm"
	t.Setenv("CACHESVC_WASM_CACHE", pluginstest.CacheDir(t, wasm))
	code, out, errOut := runCmd(t, "plugin", "check", wasm)
	if code != 1 || !strings.Contains(out, "FAIL  deterministic") || !strings.Contains(errOut, "does not conform") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCmd(t, "plugin", "check", "../../plugins/testdata/missing.wasm")
	if code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("missing file: exit %d %s", code, errOut)
	}
}

func TestKeyUsage(t *testing.T) {
	dir := t.TempDir()
	// Input that starts with '{' but is not JSON: reported where it breaks,
	// not keyed as a bare module (which failed on a missing "platform").
	badJSON := filepath.Join(dir, "bad.json")
	badLine3 := filepath.Join(dir, "line3.json")
	good := filepath.Join(dir, "good.json")
	for name, body := range map[string]string{badJSON: "{bad", badLine3: "  {\n \"backend\": \"xla\",\n x}\n",
		good: `{"backend":"passthrough","kind":"jax","key":"k"}`} {
		if err := os.WriteFile(name, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wasm := filepath.Join(dir, "wasm")
	tests := []struct {
		args []string
		code int
		text string
	}{
		{[]string{"key"}, 2, "want a FILE"},
		{[]string{"key", "--wasm-cache", wasm, badJSON}, 1, badJSON + ":1:2: not valid JSON (input that starts with '{' is read as a JSON signature, not a bare module): invalid character 'b'"},
		{[]string{"key", "--wasm-cache", wasm, badLine3}, 1, badLine3 + ":3:2: not valid JSON"},
		// Too small for the built-ins to start: say which flag, not only
		// wazero's "min 42 pages over limit of 1 pages".
		{[]string{"key", "--wasm-cache", wasm, "--plugin-memory", "64KiB", good}, 1, "raise --plugin-memory, now 64KiB"},
		{[]string{"plugin"}, 2, "missing subcommand"},
		{[]string{"plugin", "frob"}, 2, "unknown subcommand"},
		{[]string{"plugin", "check"}, 2, "exactly one FILE.wasm"},
	}
	for _, tt := range tests {
		code, _, errOut := runCmd(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.text) {
			t.Errorf("%v: exit %d %q", tt.args, code, errOut)
		}
	}
	// A module flag a launcher set in the environment, with a JSON
	// signature: the error named only flags the user never passed.
	sig := filepath.Join(dir, "sig.json")
	if err := os.WriteFile(sig, []byte(`{"backend":"passthrough","kind":"jax","key":"k"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CACHESVC_PLATFORM", "cpu")
	code, _, errOut := runCmd(t, "key", "--wasm-cache", wasm, sig)
	if want := "unset --platform (or CACHESVC_PLATFORM)"; code != 2 || !strings.Contains(errOut, want) || !strings.Contains(errOut, sig) {
		t.Errorf("JSON signature with CACHESVC_PLATFORM set: exit %d %q; want 2 naming %s and %q", code, errOut, sig, want)
	}
}

// TestKeyBareBytecodeModule keys bare MLIR bytecode files (not UTF-8) with
// `cachesvc key` and `plugin check --corpus`: they are sent as module_b64,
// byte for byte, so they get the key a server gives the same module as a
// module_b64 signature, and two files that differ only in bytes that are
// not UTF-8 get two keys (a JSON string would have made both U+FFFD).
func TestKeyBareBytecodeModule(t *testing.T) {
	t.Setenv("CACHESVC_WASM_CACHE", pluginstest.CacheDir(t))
	dir := t.TempDir()
	mods := map[string][]byte{
		filepath.Join(dir, "a.mlirbc"): []byte("ML\xefR\x00\x05body\x80\x81"),
		filepath.Join(dir, "b.mlirbc"): []byte("ML\xefR\x00\x05body\x90\x91"),
	}
	var files []string
	for name, b := range mods {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, name)
	}
	cli := keyLines(t, append([]string{"--platform", "cpu"}, files...)...)
	url := startServe(t)
	for name, b := range mods {
		body, _ := json.Marshal(map[string]any{"backend": "xla", "platform": "cpu", "module_b64": b})
		code, resp := postJSON(t, url+"/v1/default/keys", body)
		if code != http.StatusOK {
			t.Fatalf("server: %d %v", code, resp)
		}
		if cli[name].Key != resp["key"] {
			t.Errorf("%s: cachesvc key %q, server %v", name, cli[name].Key, resp["key"])
		}
	}
	if a, b := cli[files[0]].Key, cli[files[1]].Key; a == "" || a == b {
		t.Errorf("two different bytecode modules: keys %q and %q", a, b)
	}
	wasm := "../../plugins/builtin/xla/xla.wasm"
	code, out, errOut := runCmd(t, "plugin", "check", wasm, "--corpus", dir, "--platform", "cpu")
	if code != 0 || strings.Count(out, "canonical bytes") != 2 {
		t.Fatalf("plugin check of bytecode modules: exit %d\n%s%s", code, out, errOut)
	}
}

// TestReadyzPluginsFailed starts a server whose --plugin-memory is too small
// for the built-ins: once their compile has failed, /readyz says so with
// the reason, not that they are still compiling (which waiting would fix).
func TestReadyzPluginsFailed(t *testing.T) {
	t.Setenv("CACHESVC_WASM_CACHE", pluginstest.CacheDir(t))
	url := startServe(t, "--plugin-memory", "1KB")
	var body []byte
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("/readyz: %d %s; want 503", resp.StatusCode, body)
		}
		if !strings.Contains(string(body), "plugins_compiling") {
			break
		}
	}
	if !strings.Contains(string(body), `"plugins_failed"`) || !strings.Contains(string(body), "over limit") {
		t.Fatalf("/readyz: %s; want plugins_failed with the reason", body)
	}
}

// TestPluginCheckClaimsBuiltin runs `plugin check` on another build of the
// built-in passthrough plugin (its name and backend, other bytes): serve
// refuses to load it beside the built-in, so the check fails and says why.
func TestPluginCheckClaimsBuiltin(t *testing.T) {
	t.Setenv("CACHESVC_WASM_CACHE", pluginstest.CacheDir(t))
	wasm, err := os.ReadFile("../../plugins/builtin/passthrough/passthrough.wasm")
	if err != nil {
		t.Fatal(err)
	}
	// A custom section "x" with a payload: the same plugin, other bytes.
	wasm = append(bytes.Clone(wasm), 0, 3, 1, 'x', 'y')
	file := filepath.Join(t.TempDir(), "mypass.wasm")
	if err := os.WriteFile(file, wasm, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "plugin", "check", file)
	if code != 1 || !strings.Contains(out, `FAIL  loads beside the loaded plugins: duplicate plugin: name "passthrough" is taken by passthrough@1.0.0`) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestKeyInputOverLimit keys a bare module over --max-signature-size from
// stdin and from a file: refused as read, with the limit, not with the
// size of a signature built from the part of stdin that was read.
func TestKeyInputOverLimit(t *testing.T) {
	t.Setenv("CACHESVC_WASM_CACHE", pluginstest.CacheDir(t))
	module := "module @jit_f {\n" + strings.Repeat("  // padding\n", 200) + "}\n"
	file := filepath.Join(t.TempDir(), "big.mlir")
	if err := os.WriteFile(file, []byte(module), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"-", file} {
		var out, errb bytes.Buffer
		code := run(t.Context(), []string{"key", "--platform", "cpu", "--max-signature-size", "1KiB", name}, strings.NewReader(module), &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "more than 1024 bytes, over --max-signature-size 1KiB") {
			t.Errorf("key %s: exit %d, stderr %q", name, code, errb.String())
		}
	}
}
