package xlacanon

// stripModuleNames removes the top-level module's symbol name(s) from
// canonical text out[base:] if the scan left any: the scan decides on the
// source, where a removed construct (a loc, a comment) may sit between
// `module` and its name; in the output they are adjacent, and canonicalizing
// the output again must change nothing. In well-formed input the scan has
// already removed the name and this finds nothing to do.
func stripModuleNames(out []byte, base int) ([]byte, string, bool) {
	var name string
	changed := false
	for i := base; i < len(out); {
		switch c := out[i]; {
		case c == '"':
			end := skipString(out, i)
			if end < 0 {
				return out, name, changed
			}
			i = end
			continue
		case c == '{':
			return out, name, changed
		case c == 'm' && hasPrefixAt(out, i, "module") && tokenStart(out, i) && tokenEnd(out, i+6):
			j := i + 6
			for j+1 < len(out) && out[j] == ' ' && out[j+1] == '@' {
				end, sym := symbolAt(out, j+2)
				if end < 0 {
					break
				}
				if name == "" {
					name = sym
				}
				k := end
				for k < len(out) && out[k] == ' ' {
					k++
				}
				out = append(out[:j+1], out[k:]...) // keep one separator
				changed = true
			}
			if j == len(out)-1 && out[j] == ' ' {
				out = out[:j]
			}
			return out, name, changed
		}
		i++
	}
	return out, name, changed
}

// dropAttr removes the attribute-dictionary entry `name = value` whose name
// spans src[p:attr], if it is an entry of a dictionary (preceded by '{' or
// ',') with a string value (equal to want unless want is empty). It returns
// where scanning continues.
//
// The entry is judged as it will read in the output: its parts are looked
// for past everything the scan removes anyway (whitespace, comments, loc(...)
// and location aliases; see skipGone), so that `k = "v" loc(#l),` goes now
// and not only when the output is canonicalized again.
func (e *emitter) dropAttr(p, attr int, want string) int {
	src := e.src
	prev := e.lastNonSpace(p)
	if prev != '{' && prev != ',' {
		return p + 1
	}
	j := skipGone(src, attr)
	if j >= len(src) || src[j] != '=' {
		return p + 1
	}
	j = skipGone(src, j+1)
	if j >= len(src) || src[j] != '"' {
		return p + 1
	}
	q := skipString(src, j)
	if q < 0 || (want != "" && string(src[j:q]) != want) {
		return p + 1
	}
	r := skipGone(src, q)
	switch {
	case r < len(src) && src[r] == ',':
		e.drop(p, r+1, false)
		return e.start
	case r < len(src) && src[r] == '}':
		if prev == ',' {
			e.drop(p, r, true)
			return e.start
		}
		// The dictionary becomes empty: drop its braces too, unless they
		// are an op's properties `<{...}>`, which keep `<{}>`, or follow a
		// string. The latter is never valid MLIR, but a removable entry's
		// value is a string: judged before this dictionary went, the entry
		// `k = "v" {…},` stayed, and after it `k = "v",` would go, so the
		// output would not be a fixed point.
		e.flush(p)
		e.trimSpace()
		if k := len(e.out) - 1; k > e.base && e.out[k] == '{' {
			before := byte(0)
			for q := k - 1; q >= e.base; q-- {
				if !isSpace(e.out[q]) {
					before = e.out[q]
					break
				}
			}
			if e.out[k-1] == '<' || before == '"' {
				e.start = r
				return r
			}
		}
		if len(e.out) > e.base && e.out[len(e.out)-1] == '{' {
			e.out = e.out[:len(e.out)-1]
			e.trimSpace()
		}
		e.pending = true
		e.start = skipHSpace(src, r+1)
		return e.start
	}
	return p + 1
}

// skipGone returns the index of the first byte at or after i that the MLIR
// scan keeps: it skips whitespace, // comments, loc(...) and location alias
// definitions `#name = loc(...)`, each under exactly the conditions on which
// the scan removes it (a loc or alias must start a token; everything skipped
// ends in a non-name byte, so the source byte before a position is also the
// output's). An unclosed loc( stops it (the scan reports the error).
func skipGone(src []byte, i int) int {
	// Mostly there is at most one blank before a byte that starts none of
	// them: then no call.
	if i < len(src) && src[i] == ' ' {
		i++
	}
	if i < len(src) && !goneStart[src[i]] {
		return i
	}
	return skipGoneSlow(src, i)
}

// goneStart holds the bytes that may start something skipGone skips.
var goneStart = [256]bool{' ': true, '\t': true, '\n': true, '\r': true, '/': true, 'l': true, '#': true}

func skipGoneSlow(src []byte, i int) int {
	for {
		i = skipTrivia(src, i, false)
		switch {
		case i < len(src) && src[i] == 'l' && hasPrefixAt(src, i, "loc(") && tokenStart(src, i):
			end := skipBalanced(src, i+3, '(', ')')
			if end < 0 {
				return i
			}
			i = end
		case i < len(src) && src[i] == '#' && tokenStart(src, i):
			end := locAliasEnd(src, i)
			if end < 0 {
				return i
			}
			i = end
		default:
			return i
		}
	}
}

// locAliasEnd returns the end of a location alias definition
// `#name = loc(...)` starting at src[i] == '#' (the caller checks that it
// starts a token), -1 if there is none there, or -2 if its loc( is not
// closed.
func locAliasEnd(src []byte, i int) int {
	j := i + 1
	if j+8 <= len(src) {
		j += leading(identMask(loadInside(src, j))) // most names are short
	}
	for j < len(src) && identChar[src[j]] {
		j++
	}
	if j == i+1 {
		return -1
	}
	if hasPrefixAt(src, j, " = loc(") {
		j += len(" = ") // as printed: no trivia to skip
	} else {
		j = skipTrivia(src, j, false)
		if j >= len(src) || src[j] != '=' {
			return -1
		}
		j = skipTrivia(src, j+1, false)
		if !hasPrefixAt(src, j, "loc(") {
			return -1
		}
	}
	end := skipBalanced(src, j+3, '(', ')')
	if end < 0 {
		return -2
	}
	return end
}
