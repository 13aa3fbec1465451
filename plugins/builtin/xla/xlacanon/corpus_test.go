package xlacanon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// corpusDir locates ../shared/corpus beside the repository root (CI keeps
// the shared corpus next to the clone) or skips the test.
func corpusDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("repository root (go.mod) not found")
		}
		dir = parent
	}
	c := filepath.Join(dir, "..", "shared", "corpus")
	if _, err := os.Stat(filepath.Join(c, "SOURCES.md")); err != nil {
		t.Skipf("corpus not found at %s (CI keeps ../shared/corpus beside the clone): %v", c, err)
	}
	return c
}

// corpusModules returns every module file of the corpus (relative path →
// contents); the logs directory holds no modules.
func corpusModules(t testing.TB) map[string][]byte {
	t.Helper()
	dir := corpusDir(t)
	out := map[string][]byte{}
	for _, sub := range []string{"stablehlo", "hlo"} {
		files, err := filepath.Glob(filepath.Join(dir, sub, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[sub+"/"+filepath.Base(f)] = b
		}
	}
	if len(out) < 30 {
		t.Fatalf("corpus has only %d modules", len(out))
	}
	return out
}

// sigFor builds a signature JSON for module with the given fields (module and
// backend are filled in; platform defaults to "cuda").
func sigFor(t testing.TB, module []byte, fields map[string]any) []byte {
	t.Helper()
	m := map[string]any{"backend": "xla", "module": string(module), "platform": "cuda"}
	for k, v := range fields {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keyOf canonicalizes sig and returns the key the host would make.
func keyOf(t testing.TB, sig []byte) string {
	t.Helper()
	r, err := Canonicalize(sig)
	if err != nil {
		t.Fatalf("canonicalize: %v", err)
	}
	h := sha256.New()
	h.Write([]byte("xla@test\x00xla\x00"))
	h.Write(r.Canonical)
	return hex.EncodeToString(h.Sum(nil))
}

const (
	annot = "stablehlo/jax_annotate_data_placement__data_"
	aot   = "stablehlo/jaxdocs_aot_"
)

// mustMatch are the groups of SOURCES.md ("Expected canonicalization
// outcomes") whose members must share one key, plus the team's decision on
// policy group P1.
var mustMatch = []struct {
	name  string
	files []string
}{
	// G1: byte-identical; platform is outside the text (same platform here).
	{"G1", []string{annot + "2025_04_07_tpu_gspmd.mlir", annot + "2025_04_07_cuda_gspmd.mlir", annot + "2025_06_30_cuda_gspmd.mlir"}},
	// G2: byte-identical shardy pair.
	{"G2", []string{annot + "2025_06_30_tpu_shardy.mlir", annot + "2025_06_30_cuda_shardy.mlir"}},
	// G4: CRLF vs LF.
	{"G4", []string{"hlo/jaxdocs_cog_2023-06-02_pjit_rms_norm_bf16_crlf.hlo", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo"}},
	// P1 (policy): the same f(x,y)=2*x+y printed by three JAX versions
	// differs only in the module name, jax.result_info and
	// mhlo.layout_mode = "default" (equal to absent) — all removed.
	// jaxdocs_aot_2024-05-07_jit_f.0.mlir stays apart: it lacks the
	// mhlo.num_partitions/num_replicas module attributes, and inserting
	// defaults is not a text-level certainty (when in doubt, keep it).
	{"P1", []string{aot + "2024-06-21_jit_f_layout_mode.mlir", aot + "2025-02-11_jit_f.mlir", aot + "2025-05-01_jit_f.mlir"}},
}

// mustDiffer are the negative pairs SOURCES.md lists ("Must stay
// DIFFERENT") and the policy groups the team keeps apart (P2 dialect, P4
// sharding). TestCorpusAllOtherPairsDiffer checks every other pair too.
var mustDiffer = []struct {
	why  string
	a, b string
}{
	{"element type f32/f64", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f32.mlir", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f64.mlir"},
	{"element type c64/c128", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_c64.mlir", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_c128.mlir"},
	{"element type f32/c64", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f32.mlir", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_c64.mlir"},
	{"dtype and constants, same @jit_main", "stablehlo/openxla_stablehlo__add_float32_20_20_float32_20_20.mlir", "stablehlo/openxla_stablehlo__add_bfloat16_20_20_bfloat16_20_20.mlir"},
	{"f16 vs bf16 (and backend_config dtype byte)", "hlo/jaxdocs_cog_2022-12-16_pjit_rms_norm_f16.hlo", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo"},
	{"f16 vs bf16 CRLF", "hlo/jaxdocs_cog_2022-12-16_pjit_rms_norm_f16.hlo", "hlo/jaxdocs_cog_2023-06-02_pjit_rms_norm_bf16_crlf.hlo"},
	{"tensor<1xf32> vs tensor<2xf32>", annot + "2025_06_30_tpu_shardy.mlir", annot + "2026_02_04_rocm_shardy.mlir"},
	{"same @jit_f, different program", aot + "2025-05-01_jit_f.mlir", aot + "2025-05-01_jit_f_static_arg7.mlir"},
	{"same @jit_func, different program (gspmd)", annot + "2026_03_24_tpu_shardy.mlir", annot + "2025_04_07_tpu_gspmd.mlir"},
	{"same @jit_func, different program (shardy)", annot + "2026_03_24_tpu_shardy.mlir", annot + "2025_06_30_tpu_shardy.mlir"},
	{"same @jit_func, different program (rocm)", annot + "2026_03_24_tpu_shardy.mlir", annot + "2026_02_04_rocm_shardy.mlir"},
	{"gspmd vs shardy lowering", "stablehlo/jax_tpu_Sharding__data_2025_06_30_gspmd.mlir", "stablehlo/jax_tpu_Sharding__data_2025_06_30_shardy.mlir"},
	{"P2: MHLO vs StableHLO dialect", aot + "2022-09-02_jit_f.0_mhlo.mlir", aot + "2024-05-07_jit_f.0.mlir"},
	{"P1 remainder: module attributes absent vs present", aot + "2024-05-07_jit_f.0.mlir", aot + "2025-05-01_jit_f.mlir"},
	{"P4: {maximal device=0} vs {replicated}", annot + "2025_04_07_tpu_gspmd.mlir", annot + "2025_06_30_tpu_gspmd.mlir"},
	{"P3: gspmd vs shardy encodings", annot + "2025_06_30_cuda_gspmd.mlir", annot + "2025_06_30_cuda_shardy.mlir"},
	{"ApproxTopK 2 vs 4 results", "stablehlo/jax_tpu_ApproxTopK__data_2023_04_17.mlir", "stablehlo/jax_tpu_ApproxTopK__data_2023_05_16.mlir"},
}

func TestCorpusMustMatch(t *testing.T) {
	mods := corpusModules(t)
	for _, g := range mustMatch {
		t.Run(g.name, func(t *testing.T) {
			want := keyOf(t, sigFor(t, mods[g.files[0]], nil))
			for _, f := range g.files[1:] {
				if got := keyOf(t, sigFor(t, mods[f], nil)); got != want {
					t.Errorf("%s: key %s, want %s (as %s)", f, got, want, g.files[0])
				}
			}
		})
	}
}

func TestCorpusMustDiffer(t *testing.T) {
	mods := corpusModules(t)
	for _, p := range mustDiffer {
		t.Run(p.why, func(t *testing.T) {
			a, b := mods[p.a], mods[p.b]
			if a == nil || b == nil {
				t.Fatalf("corpus file missing: %s or %s", p.a, p.b)
			}
			if keyOf(t, sigFor(t, a, nil)) == keyOf(t, sigFor(t, b, nil)) {
				t.Errorf("%s and %s share a key", p.a, p.b)
			}
		})
	}
}

// TestCorpusAllOtherPairsDiffer: every two corpus modules that are not in
// one mustMatch group get different keys.
func TestCorpusAllOtherPairsDiffer(t *testing.T) {
	mods := corpusModules(t)
	group := map[string]string{}
	for _, g := range mustMatch {
		for _, f := range g.files {
			group[f] = g.name
		}
	}
	byKey := map[string]string{}
	for f, m := range mods {
		k := keyOf(t, sigFor(t, m, nil))
		if other, ok := byKey[k]; ok && (group[f] == "" || group[f] != group[other]) {
			t.Errorf("%s and %s share key %s but are in no common group", f, other, k)
		}
		byKey[k] = f
	}
}

// TestCorpusPlatformSplitsG1: G1 is byte-identical across TPU and CUDA; the
// platform field keeps their keys apart.
func TestCorpusPlatformSplitsG1(t *testing.T) {
	mods := corpusModules(t)
	tpu := keyOf(t, sigFor(t, mods[annot+"2025_04_07_tpu_gspmd.mlir"], map[string]any{"platform": "tpu"}))
	cuda := keyOf(t, sigFor(t, mods[annot+"2025_04_07_cuda_gspmd.mlir"], map[string]any{"platform": "cuda"}))
	if tpu == cuda {
		t.Fatal("tpu and cuda signatures of G1 share a key")
	}
}

func TestCorpusIdempotentAndNormalize(t *testing.T) {
	for f, m := range corpusModules(t) {
		t.Run(f, func(t *testing.T) {
			out, _, format, err := CanonicalModule(m, "")
			if err != nil {
				t.Fatal(err)
			}
			again, _, _, err := CanonicalModule(out, format)
			if err != nil || string(again) != string(out) {
				t.Fatalf("canonical text is not a fixed point (err %v)", err)
			}
			sig := sigFor(t, m, map[string]any{"xla_flags": []string{"--xla_b=1 --xla_a", "--xla_dump_to=/tmp"}, "jaxlib_version": "0.7.1", "extra": map[string]any{"k": []int{1, 2}}})
			var c Canonicalizer
			norm, err := c.Normalize(sig)
			if err != nil {
				t.Fatal(err)
			}
			norm = append([]byte(nil), norm...)
			if !json.Valid(norm) {
				t.Fatalf("normalized signature is not JSON: %.200s", norm)
			}
			if keyOf(t, norm) != keyOf(t, sig) {
				t.Fatal("canonicalize(normalize(s)) != canonicalize(s)")
			}
			norm2, err := c.Normalize(norm)
			if err != nil || string(norm2) != string(norm) {
				t.Fatalf("normalize is not idempotent (err %v)", err)
			}
		})
	}
}

// --- generated variants -------------------------------------------------

// tokenSpans calls fn for every byte range of src outside string literals.
func outsideStrings(src string, fn func(seg string) string) string {
	var b strings.Builder
	i := 0
	for i < len(src) {
		q := strings.IndexByte(src[i:], '"')
		if q < 0 {
			b.WriteString(fn(src[i:]))
			break
		}
		b.WriteString(fn(src[i : i+q]))
		j := i + q + 1
		for j < len(src) {
			if src[j] == '\\' {
				j += 2
				continue
			}
			if src[j] == '"' {
				break
			}
			j++
		}
		if j > len(src) {
			j = len(src) - 1
		}
		b.WriteString(src[i+q : j+1])
		i = j + 1
	}
	return b.String()
}

// relocate rewrites every MLIR location: strings inside loc(...) and #loc
// alias lines get other paths and names, numbers other line/columns, and
// alias numbering changes. Written independently of the scanner under test.
func relocate(src string) string {
	if !strings.Contains(src, "loc(") {
		return addLocs(src)
	}
	var b strings.Builder
	i := 0
	for i < len(src) {
		k := strings.Index(src[i:], "loc(")
		if k < 0 {
			b.WriteString(src[i:])
			break
		}
		k += i
		// skip if inside a string: count unescaped quotes before k on this line
		if inString(src, k) || (k > 0 && isIdentByte(src[k-1])) {
			b.WriteString(src[i : k+4])
			i = k + 4
			continue
		}
		b.WriteString(src[i:k])
		end := k + 4
		depth := 1
		for end < len(src) && depth > 0 {
			switch src[end] {
			case '(':
				depth++
			case ')':
				depth--
			case '"':
				end++
				for end < len(src) && src[end] != '"' {
					if src[end] == '\\' {
						end++
					}
					end++
				}
			}
			end++
		}
		b.WriteString(rewriteLoc(src[k:end]))
		i = end
	}
	return renumberAliases(b.String())
}

// addLocs gives a module printed without debug info the locations JAX adds
// with debug_info=True: an alias line and a loc on every op line.
func addLocs(src string) string {
	n := 0
	out := lines(src, func(l string) string {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "//") || strings.HasSuffix(t, "{") || strings.HasSuffix(t, "(") || t == "" ||
			!(strings.HasPrefix(t, "%") || strings.HasPrefix(t, "return") || strings.HasPrefix(t, "stablehlo.")) {
			return l
		}
		n++
		if n%2 == 0 {
			return l + " loc(#loc7)"
		}
		return l + ` loc("jit(f)/mul"("/added/path/model.py":` + strconv.Itoa(n) + `:4))`
	})
	return "#loc7 = loc(\"/tmp/x.py\":3:1)\n" + out + "\n#loc = loc(unknown)\n"
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '.' || c == '$' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func inString(src string, k int) bool {
	ls := strings.LastIndexByte(src[:k], '\n') + 1
	in := false
	for j := ls; j < k; j++ {
		if src[j] == '\\' && in {
			j++
			continue
		}
		if src[j] == '"' {
			in = !in
		}
	}
	return in
}

func rewriteLoc(loc string) string {
	var b strings.Builder
	i := 0
	for i < len(loc) {
		c := loc[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(loc) && loc[j] != '"' {
				if loc[j] == '\\' {
					j++
				}
				j++
			}
			b.WriteString(`"/home/other/checkout/`)
			b.WriteString(strings.ReplaceAll(loc[i+1:j], "jit(", "pjit("))
			b.WriteString(`_v2"`)
			i = j + 1
		case c >= '0' && c <= '9' && i > 0 && (loc[i-1] == ':' || loc[i-1] == ' '):
			j := i
			for j < len(loc) && loc[j] >= '0' && loc[j] <= '9' {
				j++
			}
			v, _ := strconv.Atoi(loc[i:j])
			b.WriteString(strconv.Itoa(v*7 + 3))
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// renumberAliases renames every #locN (outside strings) to #locN9.
func renumberAliases(src string) string {
	return outsideStrings(src, func(seg string) string {
		var b strings.Builder
		for {
			k := strings.Index(seg, "#loc")
			if k < 0 {
				b.WriteString(seg)
				return b.String()
			}
			j := k + 4
			for j < len(seg) && seg[j] >= '0' && seg[j] <= '9' {
				j++
			}
			b.WriteString(seg[:j])
			b.WriteString("9")
			seg = seg[j:]
		}
	})
}

func renameModule(src string, hlo bool) string {
	if hlo {
		k := strings.Index(src, "HloModule ")
		j := k + len("HloModule ")
		for j < len(src) && isIdentByte(src[j]) {
			j++
		}
		return src[:k] + "HloModule jit_renamed_program.77" + src[j:]
	}
	k := strings.Index(src, "module @")
	if k < 0 {
		return src
	}
	j := k + len("module @")
	for j < len(src) && isIdentByte(src[j]) {
		j++
	}
	return src[:k] + "module @jit_other_name.3" + src[j:]
}

func lines(src string, fn func(line string) string) string {
	ls := strings.Split(src, "\n")
	for i, l := range ls {
		ls[i] = fn(l)
	}
	return strings.Join(ls, "\n")
}

// rewrap breaks long lines at single spaces outside strings (not next to
// brackets or other spaces, not in comment lines) and re-indents.
func rewrap(src string) string {
	return lines(src, func(l string) string {
		if len(l) < 50 || strings.Contains(l, "//") || strings.Contains(l, "/*") {
			return l
		}
		n := 0
		return outsideStrings(l, func(seg string) string {
			var b strings.Builder
			for i := 0; i < len(seg); i++ {
				c := seg[i]
				if c == ' ' && i > 0 && i+1 < len(seg) && n%3 == 1 &&
					!strings.ContainsRune(" ([{", rune(seg[i-1])) && !strings.ContainsRune(" )]},", rune(seg[i+1])) {
					b.WriteString("\n        ")
					n++
					continue
				}
				if c == ' ' {
					n++
				}
				b.WriteByte(c)
			}
			return b.String()
		})
	})
}

func reindent(src string) string {
	return lines(src, func(l string) string {
		t := strings.TrimLeft(l, " ")
		return strings.Repeat("\t", (len(l)-len(t)+1)/2) + t
	})
}

func trailing(src string) string { return lines(src, func(l string) string { return l + " \t " }) }

func crlf(src string) string { return strings.ReplaceAll(src, "\n", "\r\n") }

func addComments(src string) string {
	return lines(src, func(l string) string { return l + "\n// inserted comment: loc(\"x\") \"quoted\"" })
}

// renameSSA renames every MLIR SSA value %x (outside strings) to %vx_: an
// exact alpha-renaming.
func renameSSA(src string) string {
	return outsideStrings(src, func(seg string) string {
		var b strings.Builder
		for i := 0; i < len(seg); i++ {
			b.WriteByte(seg[i])
			if seg[i] == '%' && i+1 < len(seg) && isIdentByte(seg[i+1]) {
				b.WriteString("vv_")
			}
		}
		return b.String()
	})
}

// hloDebug rewrites HLO metadata, adds stack_frame_id and a debug table.
func hloDebug(src string) string {
	out := outsideStrings(src, func(seg string) string {
		return strings.ReplaceAll(seg, "metadata={", `metadata={op_name="rewritten/name{}" source_file="/other/path.py" source_line=991 stack_frame_id=7 `)
	})
	k := strings.Index(out, "HloModule ")
	nl := strings.IndexByte(out[k:], '\n')
	if nl < 0 {
		return out
	}
	nl += k
	return out[:nl] + "\n\nFileNames\n1 \"a/b.py\"\n2 \"c \\\" d.py\"\n\nFunctionNames\n1 \"main\"\n\nFileLocations\n1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=2 end_column=9}\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=1}\n" + out[nl:]
}

func TestCorpusVariantsShareKey(t *testing.T) {
	for f, m := range corpusModules(t) {
		hlo := strings.HasPrefix(f, "hlo/")
		src := string(m)
		variants := map[string]string{
			"renamed":   renameModule(src, hlo),
			"crlf":      crlf(src),
			"rewrapped": rewrap(src),
			"reindent":  reindent(src),
			"trailing":  trailing(src),
			"comments":  addComments(src),
		}
		if hlo {
			variants["metadata"] = hloDebug(src)
			variants["all"] = crlf(trailing(reindent(rewrap(renameModule(hloDebug(src), true)))))
		} else {
			variants["relocated"] = relocate(src)
			variants["ssa"] = renameSSA(src)
			variants["all"] = crlf(trailing(reindent(addComments(rewrap(renameSSA(renameModule(relocate(src), false)))))))
		}
		want := keyOf(t, sigFor(t, m, nil))
		wantText, _, _, _ := CanonicalModule(m, "")
		for name, v := range variants {
			t.Run(f+"/"+name, func(t *testing.T) {
				if v == src && name != "renamed" {
					t.Fatalf("variant %s did not change the text", name)
				}
				if got := keyOf(t, sigFor(t, []byte(v), nil)); got != want {
					gotText, _, _, _ := CanonicalModule([]byte(v), "")
					t.Errorf("variant key differs\n got %.300s\nwant %.300s", firstDiff(string(gotText), string(wantText)), firstDiff(string(wantText), string(gotText)))
				}
			})
		}
	}
}

// firstDiff returns a from shortly before its first difference with b.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return a[max(0, i-60):]
}

// --- mutations that matter ------------------------------------------------

func TestCorpusMutationsChangeKey(t *testing.T) {
	mods := corpusModules(t)
	tests := []struct {
		name, file, old, new string
	}{
		{"dtype f32->f16", annot + "2025_04_07_tpu_gspmd.mlir", "tensor<1xf32>", "tensor<1xf16>"},
		{"dimension", annot + "2025_04_07_tpu_gspmd.mlir", "tensor<1xf32>", "tensor<3xf32>"},
		{"sharding string", annot + "2025_04_07_tpu_gspmd.mlir", `"{maximal device=0}"`, `"{maximal device=1}"`},
		{"whitespace inside a sharding string", annot + "2025_04_07_tpu_gspmd.mlir", `"{maximal device=0}"`, `"{maximal  device=0}"`},
		{"memory kind", annot + "2025_04_07_tpu_gspmd.mlir", `mhlo.memory_kind = "device"`, `mhlo.memory_kind = "pinned_host"`},
		{"buffer placement", annot + "2025_04_07_tpu_gspmd.mlir", `_xla_buffer_placement = "pinned_host"`, `_xla_buffer_placement = "device"`},
		{"sdy sharding", annot + "2025_06_30_tpu_shardy.mlir", `[{"a"}]>} loc("x")`, `[{}]>} loc("x")`},
		{"num_partitions", "stablehlo/jax_tpu_Sharding__data_2025_06_30_shardy.mlir", "mhlo.num_partitions = 2", "mhlo.num_partitions = 4"},
		{"constant", aot + "2025-05-01_jit_f.mlir", "dense<2>", "dense<3>"},
		{"hex constant", "stablehlo/openxla_stablehlo__add_float32_20_20_float32_20_20.mlir", `dense<"0xC681`, `dense<"0xC682`},
		{"custom call backend_config", "stablehlo/jax_tpu_ApproxTopK__data_2023_04_17.mlir", "top_k = 3 : i64", "top_k = 2 : i64"},
		{"custom call target", "stablehlo/jax_cpu_qr_lapack_geqrf__data_2025_04_02_f32.mlir", "@lapack_sgeqrf_ffi", "@lapack_dgeqrf_ffi"},
		{"triton kernel blob", "stablehlo/jax_pallas_triton_add_one__data_2024_05_02.mlir", `ir = "ML\EFR`, `ir = "ML\EFS`},
		{"private function name", "stablehlo/jax_cuda_threefry2x32__data_2024_07_30.mlir", "@_uniform", "@_uniform2"},
		{"hlo dtype", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo", "bf16[4,512,512]{2,1,0} parameter(0)", "f16[4,512,512]{2,1,0} parameter(0)"},
		{"hlo sharding", "hlo/openxla_xla__gpu_layout_assignment_test__jit_conv_general_dilated.hlo", "sharding={replicated}", "sharding={maximal device=0}"},
		{"hlo constant", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo", "constant(4)", "constant(8)"},
		{"hlo opaque backend_config padding byte", "hlo/jaxdocs_cog_2024-03-13_pjit_rms_norm_bf16.hlo", `\255\177`, `\027\177`},
		{"hlo layout", "hlo/openxla_xla__gpu_layout_assignment_test__jit_conv_general_dilated.hlo", "bf16[1,64,64,16]{3,2,1,0}", "bf16[1,64,64,16]{0,1,2,3}"},
		{"hlo header attribute", "hlo/jaxdocs_cog_2024-11-19_pjit_custom_p_loss.hlo", "num_partitions=4", "num_partitions=8"},
		{"hlo window", "hlo/openxla_xla__reduce_window_test__jit_dilated_window_sum.10.hlo", "rhs_dilate=1x2x2", "rhs_dilate=1x2x1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := string(mods[tt.file])
			if !strings.Contains(src, tt.old) {
				t.Fatalf("%s does not contain %q", tt.file, tt.old)
			}
			mut := strings.Replace(src, tt.old, tt.new, 1)
			if keyOf(t, sigFor(t, []byte(src), nil)) == keyOf(t, sigFor(t, []byte(mut), nil)) {
				t.Errorf("mutation %q -> %q kept the key", tt.old, tt.new)
			}
		})
	}
}

func TestSignatureFieldsChangeKey(t *testing.T) {
	mods := corpusModules(t)
	m := mods[aot+"2025-05-01_jit_f.mlir"]
	base := map[string]any{
		"platform": "cuda", "platform_version": "12.4", "jaxlib_version": "0.7.1",
		"xla_flags":       []string{"--xla_gpu_autotune_level=2", "--xla_dump_to=/tmp/a"},
		"compile_options": "3f0a", "topology": "fp:abc", "codec": "zstandard", "extra": map[string]any{"hook": "x"},
	}
	want := keyOf(t, sigFor(t, m, base))
	with := func(k string, v any) map[string]any {
		c := map[string]any{}
		for kk, vv := range base {
			c[kk] = vv
		}
		c[k] = v
		return c
	}
	same := []struct {
		name   string
		fields map[string]any
	}{
		{"excluded flag changed", with("xla_flags", []string{"--xla_gpu_autotune_level=2", "--xla_dump_to=/elsewhere", "--xla_dump_hlo_as_text"})},
		{"excluded flags dropped", with("xla_flags", []string{"--xla_gpu_autotune_level=2"})},
		{"flags as one XLA_FLAGS string", with("xla_flags", []string{" --xla_dump_to=/tmp/b   --xla_gpu_autotune_level=2 "})},
		{"force host device count excluded (as in JAX)", with("xla_flags", []string{"--xla_gpu_autotune_level=2", "--xla_force_host_platform_device_count=8"})},
		{"extra whitespace", with("extra", json.RawMessage(`{ "hook" : "x" }`))},
	}
	for _, tt := range same {
		if got := keyOf(t, sigFor(t, m, tt.fields)); got != want {
			t.Errorf("%s: key changed", tt.name)
		}
	}
	differ := []struct {
		name   string
		fields map[string]any
	}{
		{"platform", with("platform", "rocm")},
		{"platform version", with("platform_version", "12.5")},
		{"jaxlib version", with("jaxlib_version", "0.7.2")},
		{"flag value", with("xla_flags", []string{"--xla_gpu_autotune_level=3"})},
		{"flag added", with("xla_flags", []string{"--xla_gpu_autotune_level=2", "--xla_gpu_enable_triton_gemm=false"})},
		{"flag removed", with("xla_flags", []string{})},
		{"compile options", with("compile_options", "3f0b")},
		{"topology", with("topology", "fp:abd")},
		{"topology as kinds", with("topology", []string{"fp:abc"})},
		{"codec", with("codec", "zlib")},
		{"extra", with("extra", map[string]any{"hook": "y"})},
		{"extra absent", with("extra", nil)},
	}
	for _, tt := range differ {
		if got := keyOf(t, sigFor(t, m, tt.fields)); got == want {
			t.Errorf("%s: key did not change", tt.name)
		}
	}
}
