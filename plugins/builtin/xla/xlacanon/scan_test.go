package xlacanon

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestCanonMLIRUnits(t *testing.T) {
	tests := []struct {
		name, in, want, display string
	}{
		{"loc inside string kept", `module { %0 = "x.op"() {s = "loc(#loc1) // not a comment"} : () -> () loc(#loc1) }`,
			`module { %0 = "x.op"() {s = "loc(#loc1) // not a comment"} : () -> ()}`, ""},
		{"escaped quote in loc", `module { %a = x.y %b : t loc("a\"b)c"(#loc2)) }`, `module { %0 = x.y %1 : t}`, ""},
		{"nested parens in loc", `module { return loc(callsite(fused["a", "b"] at loc("f":1:2 to :5))) }`, `module { return}`, ""},
		{"loc alias lines", "#loc = loc(unknown)\n#loc12 = loc(\"x.py\":3:4)\nmodule @jit_f {\n} loc(#loc)\n#loc3 = loc(\"f\"(#loc12))\n",
			`module {}`, "jit_f"},
		{"loc-prefixed name is not a loc", `module { %0 = my.loc(%1) : t }`, `module { %0 = my.loc(%1) : t }`, ""},
		{"comment removed", "// RUN: opt %s\nmodule @m { // trailing\n  %0 = a.b // c\n}\n", `module {%0 = a.b}`, "m"},
		{"whitespace inside string kept", "module {  %0 = a.b  {s = \"a  \\t b\"}\r\n}", `module {  %0 = a.b  {s = "a  \t b"}}`, ""},
		{"crlf and rewrapping", "module @x {\r\n  func.func @f(\r\n    %arg0: t,\r\n    %arg1: t\r\n  ) {\r\n  }\r\n}\r\n",
			`module {func.func @f(%0: t, %1: t) {}}`, "x"},
		{"result_info first", `func.func @m() -> (t {jax.result_info = "r", mhlo.sharding = "{replicated}"})`,
			`func.func @m() -> (t {mhlo.sharding = "{replicated}"})`, ""},
		{"result_info last", `func.func @m() -> (t {mhlo.sharding = "{replicated}", jax.result_info = "r"})`,
			`func.func @m() -> (t {mhlo.sharding = "{replicated}"})`, ""},
		{"result_info alone drops dict", `func.func @m(%arg0: t {jax.arg_info = "a"} loc("x"), %arg1: t) -> (t {jax.result_info = ""}) {`,
			`func.func @m(%0: t, %1: t) -> (t) {`, ""},
		{"names glued together", "module@0@0@0", `module`, "0"},
		{"name after a removed loc", `module loc(#l) @x @y {}`, `module {}`, "x"},
		{"result_info alone in properties keeps <{}>", `"x.op"(%a) <{jax.result_info = "r"}> : (t) -> t`, `"x.op"(%0) <{}> : (t) -> t`, ""},
		{"result_info middle", `{a = 1, jax.result_info = "x", b = 2}`, `{a = 1, b = 2}`, ""},
		{"result_info needs string value", `{jax.result_info = 3}`, `{jax.result_info = 3}`, ""},
		{"result_info outside dict kept", `x jax.result_info = "a"`, `x jax.result_info = "a"`, ""},
		{"layout_mode default dropped", `(%arg0: t {mhlo.layout_mode = "default"}, %arg1: t {mhlo.layout_mode = "{1,0}"})`,
			`(%0: t, %1: t {mhlo.layout_mode = "{1,0}"})`, ""},
		{"layout_mode before a loc (fuzz)", `,mhlo.layout_mode="default"loc(),`, `,`, ""},
		{"result_info with locs and comments around its parts", "{a = 1, jax.result_info loc(#l) = // c\n \"r\" loc(\"x\") #l2 = loc(unknown)\n}",
			`{a = 1}`, ""},
		{"result_info glued to a loc is not an entry", `{jax.result_infoloc(x) = "r"}`, `{jax.result_infoloc(x) = "r"}`, ""},
		{"result_info followed by a non-entry token kept", `{jax.result_info = "r" x loc(y)}`, `{jax.result_info = "r" x}`, ""},
		{"emptied dict after a string keeps its braces (fuzz)", `0,jax.result_info=""{jax.result_info=""},0`, `0,jax.result_info=""{},0`, ""},
		{"emptied dict after a loc after a string keeps its braces", `{a = "x" loc(l) {jax.arg_info = "y"}}`, `{a = "x" {}}`, ""},
		{"ssa renaming first appearance", `%cst = c %arg0, %arg1 %0 = add %cst, %arg0 %5:2 = f %0 return %5#1`,
			`%0 = c %1, %2 %3 = add %0, %1 %4:2 = f %3 return %4#1`, ""},
		{"ssa leading zero distinct", `%0 = a %00`, `%0 = a %1`, ""},
		{"quoted module name", `module @"my mod" attributes {a = 1} {}`, `module attributes {a = 1} {}`, "my mod"},
		{"only first top-level module renamed", `module @a { module @b {} }`, `module { module @b {} }`, "a"},
		{"escaped backslash before quote", `module { x = "a\\" loc("b") }`, `module { x = "a\\"}`, ""},
		{"spacing inside a line is verbatim", "f( a , b ) [ 1 ] { c }", `f( a , b ) [ 1 ] { c }`, ""},
		{"line breaks next to brackets vanish", "f(\n  a,\n  b\n) [\n1\n] {\n  c\n}\n", `f(a, b) [1] {c}`, ""},
		{"tabs and trailing whitespace at line ends", "a \t\r\n\t\tb\t \n", `a b`, ""},
		{"dialect resources kept", "module {}\n{-#\n  dialect_resources: {\n    builtin: { r: \"0x01\" }\n  }\n#-}\n",
			`module {} {-# dialect_resources: {builtin: { r: "0x01" }} #-}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, name, _, err := CanonicalModule([]byte(tt.in), FormatStableHLO)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("canonical\n got %q\nwant %q", got, tt.want)
			}
			if name != tt.display {
				t.Errorf("display name %q, want %q", name, tt.display)
			}
			again, _, _, err := CanonicalModule(got, FormatStableHLO)
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: %q (%v)", again, err)
			}
		})
	}
}

func TestCanonHLOUnits(t *testing.T) {
	tests := []struct {
		name, in, want, display string
	}{
		{"metadata with brace in string", `HloModule jit_f, entry_computation_layout={()->f32[]}
ENTRY %main.1 () -> f32[] {
  ROOT %c = f32[] constant(1), metadata={op_name="a}b{" source_file="x.py" source_line=3}
}`, `HloModule _, entry_computation_layout={()->f32[]} ENTRY %main.1 () -> f32[] {ROOT %c = f32[] constant(1)}`, "jit_f"},
		{"metadata escaped quotes", `HloModule m
ENTRY e { ROOT c = f32[] constant(1), metadata={op_name="x[axis_names=(\'x\',) s=\"}\"]"}, sharding={replicated} }`,
			`HloModule _ ENTRY e { ROOT c = f32[] constant(1), sharding={replicated} }`, "m"},
		{"metadata multi-line op_name", "HloModule m\nENTRY e {\n  c = s64[] constant(0), metadata={op_type=\"r\" op_name=\"a[ b\\n      c]\"}\n}",
			`HloModule _ ENTRY e {c = s64[] constant(0)}`, "m"},
		{"comma separated metadata", `HloModule m ENTRY e { c = f32[] add(a, b), metadata={op_type="Add" op_name="x", source_file="s.txt", source_line=17} }`,
			`HloModule _ ENTRY e { c = f32[] add(a, b)}`, "m"},
		{"stack frame id outside metadata", `HloModule m ENTRY e { c = f32[] add(a, b), stack_frame_id=4 }`,
			`HloModule _ ENTRY e { c = f32[] add(a, b)}`, "m"},
		{"comments and index annotations", "/* license */\n// generated\nHloModule m\nENTRY e {\n  t = (f32[], f32[]) tuple(a, /*index=1*/b)\n}\n",
			`HloModule _ ENTRY e {t = (f32[], f32[]) tuple(a, b)}`, "m"},
		{"metadata inside string kept", `HloModule m ENTRY e { c = f32[] custom-call(), backend_config="metadata={x}" }`,
			`HloModule _ ENTRY e { c = f32[] custom-call(), backend_config="metadata={x}" }`, "m"},
		{"stack frame tables", "HloModule m, entry_computation_layout={()->pred[]}\n\nFileNames\n1 \"a.py\"\n\nFunctionNames\n1 \"main\"\n\nFileLocations\n1 {file_name_id=1 function_name_id=1 line=1 end_line=1 column=2 end_column=3}\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\n\nENTRY %c () -> pred[] {\n  ROOT %c = pred[] constant(true), metadata={op_type=\"const\" stack_frame_id=1}\n}\n",
			`HloModule _, entry_computation_layout={()->pred[]} ENTRY %c () -> pred[] {ROOT %c = pred[] constant(true)}`, "m"},
		{"header attributes kept", "HloModule jit_f.10, is_scheduled=true, num_partitions=4, frontend_attributes={fingerprint_before_lhs=\"d7\"}\n",
			`HloModule _, is_scheduled=true, num_partitions=4, frontend_attributes={fingerprint_before_lhs="d7"}`, "jit_f.10"},
		{"name after removed metadata", "HloModule,metadata={}00", `HloModule _`, "00"},
		{"blanks after a removed table fold", "HloModule m\nStackFrames  \t%p", `HloModule _ %p`, "m"},
		{"header is the first HloModule even without a name", "HloModule\r\n)\r\nHloModule x", `HloModule) HloModule x`, ""},
		{"header without name then a tab", "HloModule /*c*/,HloModule\tHloModule x", "HloModule,HloModule\tHloModule x", ""},
		{"name after a comment, tab kept before it", "HloModule\t/*c*/ x, y=1", `HloModule _, y=1`, "x"},
		{"crlf", "HloModule m\r\n\r\nENTRY e {\r\n  ROOT c = f32[] constant(1)\r\n}\r\n", `HloModule _ ENTRY e {ROOT c = f32[] constant(1)}`, "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, name, format, err := CanonicalModule([]byte(tt.in), "")
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if format != FormatHLO {
				t.Fatalf("format %q, want hlo", format)
			}
			if string(got) != tt.want {
				t.Errorf("canonical\n got %q\nwant %q", got, tt.want)
			}
			if name != tt.display {
				t.Errorf("display name %q, want %q", name, tt.display)
			}
			again, _, _, err := CanonicalModule(got, FormatHLO)
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: %q (%v)", again, err)
			}
		})
	}
}

func TestCanonModuleErrors(t *testing.T) {
	tests := []struct {
		name, format, in string
	}{
		{"unterminated string", FormatStableHLO, `module { x = "abc }`},
		{"unbalanced loc", FormatStableHLO, `module { x loc("a"(#loc1) }`},
		{"unbalanced alias loc", FormatStableHLO, "#loc1 = loc(\"x\"\nmodule {}"},
		{"unbalanced metadata", FormatHLO, `HloModule m ENTRY e { c = f32[] constant(1), metadata={op_name="x"`},
		{"unterminated block comment", FormatHLO, "/* x\nHloModule m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := CanonicalModule([]byte(tt.in), tt.format)
			if !errors.Is(err, ErrModule) {
				t.Fatalf("err = %v, want ErrModule", err)
			}
		})
	}
}

// TestWordClassifiers checks the exact SWAR classifiers against their byte
// tables for every byte value at every position of a word, with neighbours
// that provoke carries and borrows (0x00, 0x80, 0xff and a match).
func TestWordClassifiers(t *testing.T) {
	type class struct {
		name string
		mask func(uint64) uint64
		want func(byte) bool
	}
	classes := []class{
		{"spaceMask", spaceMask, isSpace},
		{"identMask", identMask, func(c byte) bool { return identChar[c] }},
		{"digitMask", digitMask, isDigit},
		{"eq8 '%'", func(x uint64) uint64 { return eq8(x, '%') }, func(c byte) bool { return c == '%' }},
		{"zero8", zero8, func(c byte) bool { return c == 0 }},
		{"in8 A-Z", func(x uint64) uint64 { return in8(x, 'A', 'Z') }, func(c byte) bool { return c >= 'A' && c <= 'Z' }},
	}
	for _, cl := range classes {
		eachWord([]byte{0x00, 0x80, 0xff, ' ', 'a', '0', 0x7f}, func(w [8]byte) {
			m := cl.mask(load64(w[:], 0))
			for k := range w {
				if got, want := m>>(8*k+7)&1 == 1, cl.want(w[k]); got != want || m>>(8*k)&0x7f != 0 {
					t.Fatalf("%s(% x): byte %d flag %v, want %v (mask %#x)", cl.name, w, k, got, want, m)
				}
			}
		})
	}
}

// eachWord calls f with every word of one fill byte (each of fills) in
// which one position (each of the eight) holds any byte value.
func eachWord(fills []byte, f func(w [8]byte)) {
	for _, fill := range fills {
		for pos := 0; pos < 8; pos++ {
			for v := 0; v < 256; v++ {
				var w [8]byte
				for k := range w {
					w[k] = fill
				}
				w[pos] = byte(v)
				f(w)
			}
		}
	}
}

func TestLeadingAndDigits(t *testing.T) {
	tests := []struct {
		in     string
		space  int
		ident  int
		digits int
	}{
		{"        ", 8, 0, 0},
		{"\n    %0 ", 5, 0, 0},
		{"arg0: te", 0, 4, 0},
		{"cst_0 = ", 0, 5, 0},
		{"12345678", 0, 8, 8},
		{"0 = stab", 0, 1, 1},
		{"907, %5 ", 0, 3, 3},
		{"$a.b-c_D", 0, 8, 0},
		{"x\xc3\xa9yz,  ", 0, 1, 0},
		{"\r\t \n\x0b   ", 4, 0, 0},
		{"00042)  ", 0, 5, 5},
	}
	for _, tt := range tests {
		x := load64([]byte(tt.in), 0)
		if got := leading(spaceMask(x)); got != tt.space {
			t.Errorf("%q: leading spaces %d, want %d", tt.in, got, tt.space)
		}
		if got := leading(identMask(x)); got != tt.ident {
			t.Errorf("%q: leading ident bytes %d, want %d", tt.in, got, tt.ident)
		}
		if got := leading(digitMask(x)); got != tt.digits {
			t.Errorf("%q: leading digits %d, want %d", tt.in, got, tt.digits)
		}
	}
}

// TestHasByte8Raw checks that hasByte8Raw masked with hi8 is hasByte8 (so
// that classifiers masking once give the same flags), and that hasByte8's
// lowest flag is the first match, for every byte value at every position of
// words of fill bytes that provoke borrows.
func TestHasByte8Raw(t *testing.T) {
	for _, c := range []byte{'\n', '"', '/', '%', '#', '(', '.', 'm', 0x00, 0x80, 0xff} {
		eachWord([]byte{0x00, 0x01, 0x80, 0xff, c ^ 1, c + 1}, func(w [8]byte) {
			x := load64(w[:], 0)
			m := hasByte8(x, c)
			if got := hasByte8Raw(x, c) & hi8; got != m {
				t.Fatalf("hasByte8Raw(% x, %#x)&hi8 = %#x, hasByte8 = %#x", w, c, got, m)
			}
			first := bytes.IndexByte(w[:], c)
			if (m == 0) != (first < 0) || (m != 0 && firstFlag(m) != first) {
				t.Fatalf("hasByte8(% x, %#x) = %#x: first match %d", w, c, m, first)
			}
		})
	}
}

// TestMLIRScanEndsAtItsInput places each construct the scan handles at
// every distance from the end of the module, with the module a prefix of a
// longer buffer whose bytes past the end would change the output if read
// (stops, names, spaces; several kinds), and compares the output with the
// module's on its own: the unchecked loads of the scan (byteInside at the
// stops, loadInside in the word loop and the fast paths, the run copies'
// move32At) must read nothing past the input wherever it ends, in
// particular right at a word boundary.
// It runs under wasm too, where those loads are unchecked.
func TestMLIRScanEndsAtItsInput(t *testing.T) {
	snippets := []string{
		"%0 = a.b %arg0, %c_1",
		"%a",
		"x loc(#loc12)",
		"x loc(\"f\":1:2)",
		"loc(",
		"#loc3 = loc(\"x\")",
		"a\n    b",
		"a\n",
		"a \t\r\n\n        \n  b",
		"x loc(#l)\n          \n",
		"#loc1 = loc(unknown)\n\n\n\n\n\n\n\n\n",
		"s = \"str\"",
		"\"",
		"{jax.result_info = \"r\"}",
		"{mhlo.layout_mode = \"default\"}",
		"jax.",
		"_m",
		"module @m {}",
		"// c",
	}
	poisons := []string{"%1 %2 %3 %4 %5 %6", "loc(#l) loc(#l)", "\"\"\"\"\"\"\"\"", "\n\n  \n  \n", "        ", "xxxxxxxxxxxxxxxx", ")))))))))"}
	for _, sn := range snippets {
		for pad := 0; pad <= 40; pad++ {
			mod := []byte(strings.Repeat("%q = f ", pad/7) + strings.Repeat("y", pad%7) + " " + sn)
			want, _, _, errWant := CanonicalModule(mod, FormatStableHLO)
			for _, p := range poisons {
				buf := append(append([]byte(nil), mod...), p...)
				got, _, _, err := CanonicalModule(buf[:len(mod)], FormatStableHLO)
				if (err == nil) != (errWant == nil) || string(got) != string(want) {
					t.Fatalf("%q followed by %q: got %q (%v), alone %q (%v)", mod, p, got, err, want, errWant)
				}
			}
		}
	}
}
