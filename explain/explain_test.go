package explain

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func base() map[string]string {
	return map[string]string{
		"module":           "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"jaxlib_version":   "0.4.38",
		"platform":         "cpu",
		"platform_version": "",
		"xla_flags":        "--xla_cpu_enable_fast_math=false",
		"compile_options":  "4e07408562bedb8b60ce05c1decfe3ad16b72230967de01f640b7e4729b49fce",
	}
}

func with(k, v string) map[string]string {
	m := base()
	m[k] = v
	return m
}

func TestExplainNamesTheDifferingComponent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stored := []Candidate{
		{Key: "aa", Name: "jit_f", Created: t0, Components: base()},
		// An unrelated program: differs in module and flags.
		{Key: "bb", Name: "jit_g", Created: t0.Add(time.Minute), Components: with("module", strings.Repeat("1", 64))},
	}
	stored[1].Components["xla_flags"] = "--xla_other=1"
	tests := []struct {
		name      string
		want      map[string]string
		reason    string
		label     string
		wantValue string
		haveValue string
		short     bool
	}{
		{"xla flags", with("xla_flags", "--xla_cpu_enable_fast_math=true"), "xla_flags", "XLA flags differ", "--xla_cpu_enable_fast_math=true", "--xla_cpu_enable_fast_math=false", true},
		{"jaxlib version", with("jaxlib_version", "0.4.36"), "jaxlib_version", "jaxlib version differs", "0.4.36", "0.4.38", true},
		{"platform", with("platform", "cuda"), "platform", "platform differs", "cuda", "cpu", true},
		{"module", with("module", strings.Repeat("ab", 32)), "module", "module differs", "sha256:abababababab…", "sha256:9f86d081884c…", false},
		{"long value as digest", with("xla_flags", strings.Repeat("--xla_x=1 ", 20)), "xla_flags", "XLA flags differ", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := Explain(tt.want, stored)
			if ex.Reason != tt.reason {
				t.Fatalf("reason = %q, want %q (summary %q)", ex.Reason, tt.reason, ex.Summary)
			}
			if got := ReasonLabel(ex.Reason); got != tt.label {
				t.Errorf("label = %q, want %q", got, tt.label)
			}
			if ex.Compared != 2 || len(ex.Nearest) != 2 || ex.Nearest[0].Key != "aa" {
				t.Fatalf("nearest = %+v", ex.Nearest)
			}
			d := ex.Nearest[0].Diffs
			if len(d) != 1 || d[0].Component != tt.reason || d[0].Short != tt.short {
				t.Fatalf("diffs = %+v", d)
			}
			if tt.wantValue != "" && (d[0].Want != tt.wantValue || d[0].Have != tt.haveValue) {
				t.Errorf("diff values = %q/%q, want %q/%q", d[0].Want, d[0].Have, tt.wantValue, tt.haveValue)
			}
			if !tt.short && !strings.HasPrefix(d[0].Want, "sha256:") {
				t.Errorf("long value not abbreviated: %q", d[0].Want)
			}
			if !strings.Contains(ex.Summary, tt.label[:4]) {
				t.Errorf("summary %q does not name %q", ex.Summary, tt.label)
			}
		})
	}
}

func TestExplainSpecialReasons(t *testing.T) {
	tests := []struct {
		name   string
		want   map[string]string
		cands  []Candidate
		reason string
	}{
		{"empty namespace", base(), nil, ReasonNoEntries},
		{"no components", nil, []Candidate{{Key: "aa", Components: base()}}, ReasonNoComponents},
		{"identical", base(), []Candidate{{Key: "aa", Components: base()}}, ReasonNotComparable},
		{"two differ", func() map[string]string { m := with("platform", "tpu"); m["jaxlib_version"] = "0.5.0"; return m }(), []Candidate{{Key: "aa", Components: base()}}, "jaxlib_version+platform"},
		{"module and its size", func() map[string]string {
			m := with("module", "xxh64:0011223344556677")
			m["module_bytes"] = "812"
			return m
		}(), []Candidate{{Key: "aa", Components: func() map[string]string {
			m := with("module", "xxh64:8899aabbccddeeff")
			m["module_bytes"] = "790"
			return m
		}()}}, "module"},
		{"missing component", func() map[string]string { m := base(); m["topology"] = "v4-8"; return m }(), []Candidate{{Key: "aa", Components: base()}}, "topology"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ex := Explain(tt.want, tt.cands); ex.Reason != tt.reason {
				t.Fatalf("reason = %q, want %q", ex.Reason, tt.reason)
			}
		})
	}
}

func TestIndexIsBoundedAndNewestFirst(t *testing.T) {
	x := NewIndex(IndexConfig{PerGroup: 4, MaxGroups: 2})
	t0 := time.Now()
	for i := 0; i < 10; i++ {
		x.Add("ns", "xla", fmt.Sprint("k", i), "", t0.Add(time.Duration(i)*time.Second), with("jaxlib_version", fmt.Sprint("0.4.", i)))
	}
	if n := x.Len("ns", "xla"); n != 4 {
		t.Fatalf("len = %d, want 4", n)
	}
	ex := x.Explain("ns", "xla", with("jaxlib_version", "0.4.99"))
	if ex.Compared != 4 || ex.Nearest[0].Key != "k9" || ex.Reason != "jaxlib_version" {
		t.Fatalf("explanation = %+v", ex)
	}
	x.Remove("ns", "xla", "k9")
	if ex := x.Explain("ns", "xla", base()); ex.Compared != 3 {
		t.Fatalf("compared after remove = %d", ex.Compared)
	}
	x.Add("a", "xla", "k", "", t0, base())
	x.Add("b", "xla", "k", "", t0, base()) // third group: not indexed
	if x.Len("b", "xla") != 0 || x.Len("a", "xla") != 1 {
		t.Fatal("group bound not enforced")
	}
	if ex := x.Explain("other", "xla", base()); ex.Reason != ReasonNoEntries {
		t.Fatalf("reason = %q", ex.Reason)
	}
}

func ExampleExplain() {
	stored := []Candidate{{Key: "aa", Name: "jit_f", Components: map[string]string{"platform": "cpu", "jaxlib_version": "0.4.38"}}}
	ex := Explain(map[string]string{"platform": "cpu", "jaxlib_version": "0.4.36"}, stored)
	fmt.Println(ex.Reason)
	fmt.Println(ex.Summary)
	// Output:
	// jaxlib_version
	// Jaxlib version differs from the nearest entry (jit_f): jaxlib_version "0.4.36" here, "0.4.38" there.
}

// An entry compiled without XLA flags stores the component empty: the
// summary says "none" there, not "".
func ExampleExplain_emptyValue() {
	stored := []Candidate{{Key: "aa", Name: "jit_step", Components: map[string]string{"platform": "cpu", "xla_flags": ""}}}
	ex := Explain(map[string]string{"platform": "cpu", "xla_flags": "--xla_cpu_enable_fast_math=true"}, stored)
	fmt.Println(ex.Summary)
	// Output:
	// XLA flags differ from the nearest entry (jit_step): xla_flags "--xla_cpu_enable_fast_math=true" here, none there.
}

// TestExplainNeverPointsAtIncomparableEntries checks that a miss is never
// explained by an entry whose components say nothing about why the key
// differs: in passthrough (jax-key) mode every entry has the components
// {"kind": "jax"}, so the "nearest" entry is an unrelated program.
func TestExplainNeverPointsAtIncomparableEntries(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// What plugins/builtin/passthrough emits for every signature.
	pass := func(kind string) map[string]string { return map[string]string{"kind": kind} }
	tests := []struct {
		name    string
		want    map[string]string
		cands   []Candidate
		reason  string
		nearest string // key of the first nearest entry; "" for none
	}{
		{"passthrough, same kind", pass("jax"), []Candidate{
			{Key: "aa", Name: "jit_f-0a1b", Created: t0, Components: pass("jax")},
			{Key: "bb", Name: "jit_g-2c3d", Created: t0.Add(time.Minute), Components: pass("jax")},
		}, ReasonNotComparable, ""},
		{"passthrough, other kinds stored", pass("pt2"), []Candidate{
			{Key: "aa", Name: "jit_f-0a1b", Created: t0, Components: pass("jax")},
			{Key: "bb", Name: "pt2:77", Created: t0, Components: pass("pt2")},
		}, ReasonNotComparable, ""},
		{"passthrough, only another kind stored", pass("pt2"), []Candidate{
			{Key: "aa", Name: "jit_f-0a1b", Created: t0, Components: pass("jax")},
		}, ReasonNotComparable, ""},
		{"xla, every candidate identical", base(), []Candidate{
			{Key: "aa", Name: "jit_f", Created: t0, Components: base()},
		}, ReasonNotComparable, ""},
		{"xla, identical candidate skipped for one that differs", with("xla_flags", "--xla_x=1"), []Candidate{
			{Key: "aa", Name: "jit_f", Created: t0.Add(time.Minute), Components: with("xla_flags", "--xla_x=1")},
			{Key: "bb", Name: "jit_f", Created: t0, Components: base()},
		}, "xla_flags", "bb"},
		{"xla, nearest named", with("platform", "cuda"), []Candidate{
			{Key: "aa", Name: "jit_f", Created: t0, Components: base()},
		}, "platform", "aa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := Explain(tt.want, tt.cands)
			if ex.Reason != tt.reason {
				t.Fatalf("reason = %q, want %q (summary %q)", ex.Reason, tt.reason, ex.Summary)
			}
			if tt.nearest == "" {
				if len(ex.Nearest) != 0 {
					t.Fatalf("nearest = %+v, want none", ex.Nearest)
				}
				if strings.Contains(ex.Summary, "aa") || strings.Contains(ex.Summary, "jit_") {
					t.Errorf("summary names an entry: %q", ex.Summary)
				}
				if ReasonLabel(ex.Reason) == "" || ex.Summary == "" {
					t.Errorf("label %q summary %q", ReasonLabel(ex.Reason), ex.Summary)
				}
				return
			}
			if len(ex.Nearest) == 0 || ex.Nearest[0].Key != tt.nearest {
				t.Fatalf("nearest = %+v, want %s first", ex.Nearest, tt.nearest)
			}
			for _, n := range ex.Nearest {
				if len(n.Diffs) == 0 {
					t.Errorf("nearest %s has no diffs: it says nothing about the miss", n.Key)
				}
			}
		})
	}
	// Through the index, as the server asks it in jax-key mode.
	x := NewIndex(IndexConfig{})
	x.Add("ns", "passthrough", "aa", "jit_f-0a1b", t0, pass("jax"))
	if ex := x.Explain("ns", "passthrough", pass("jax")); ex.Reason != ReasonNotComparable || len(ex.Nearest) != 0 || !strings.Contains(ex.Summary, "opaque") {
		t.Fatalf("index explanation = %+v", ex)
	}
}

// TestJaxlibBuildLabel: the xla plugin's jaxlib build fingerprint has a
// human name, and a miss on it alone is explained by it.
func TestJaxlibBuildLabel(t *testing.T) {
	if got := Label("jaxlib_build"); got != "jaxlib build" {
		t.Errorf("Label = %q", got)
	}
	want, have := base(), base()
	want["jaxlib_build"] = strings.Repeat("ab", 32)
	have["jaxlib_build"] = strings.Repeat("cd", 32)
	ex := Explain(want, []Candidate{{Key: "aa", Components: have}})
	if ex.Reason != "jaxlib_build" || ReasonLabel(ex.Reason) != "jaxlib build differs" {
		t.Errorf("reason %q (%q), summary %q", ex.Reason, ReasonLabel(ex.Reason), ex.Summary)
	}
}
