package xlacanon

import (
	"strconv"
	"strings"
	"testing"
)

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
