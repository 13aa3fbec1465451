package xlacanon

import (
	"fmt"
)

// ssaNames renames MLIR SSA values (%0, %c, %cst_3, %arg0 …) to %0, %1, … in
// order of first appearance. The mapping is injective on names, so the
// renamed text parses to the same IR: printer-chosen names carry no meaning.
// Numeric names index a slice; other names go to an open-addressing table
// keyed by their position in the source (no allocation, no map: maps are slow
// under wasm).
type ssaNames struct {
	num   []int32 // numeric names without leading zeros: new number+1, 0 = unseen
	slots []ssaSlot
	used  int
	n     int32
	src   []byte
}

type ssaSlot struct {
	off, len int32 // name bytes in src; len 0 = empty slot
	hash     uint32
	val      int32
}

func (s *ssaNames) reset(src []byte) {
	clear(s.num)
	s.num = s.num[:0]
	clear(s.slots)
	if len(s.slots) == 0 {
		s.slots = make([]ssaSlot, 256)
	}
	s.used = 0
	s.n = 0
	s.src = src
}

// lookupNum returns the new number of the numeric SSA name v (no leading
// zeros); the common case, a name seen before, inlines.
func (s *ssaNames) lookupNum(v int) int32 {
	if v < len(s.num) && s.num[v] != 0 {
		return s.num[v] - 1
	}
	return s.lookupNumSlow(v)
}

func (s *ssaNames) lookupNumSlow(v int) int32 {
	if v >= len(s.num) {
		if v >= cap(s.num) {
			grown := make([]int32, v+1, 2*v+64)
			copy(grown, s.num)
			s.num = grown
		} else {
			s.num = s.num[:v+1]
		}
	}
	if s.num[v] == 0 {
		s.n++
		s.num[v] = s.n
	}
	return s.num[v] - 1
}

// lookup returns the new number of the SSA name src[a:b] (without '%').
func (s *ssaNames) lookup(a, b int) int32 {
	id := s.src[a:b]
	if isDigit(id[0]) && (id[0] != '0' || len(id) == 1) && len(id) <= 5 {
		v := 0
		for _, c := range id {
			v = v*10 + int(c-'0')
		}
		if v >= len(s.num) {
			if v >= cap(s.num) {
				grown := make([]int32, v+1, 2*v+64)
				copy(grown, s.num)
				s.num = grown
			} else {
				s.num = s.num[:v+1]
			}
		}
		if s.num[v] == 0 {
			s.n++
			s.num[v] = s.n
		}
		return s.num[v] - 1
	}
	h := uint32(2166136261)
	for _, c := range id {
		h = (h ^ uint32(c)) * 16777619
	}
	mask := len(s.slots) - 1
	for k := int(h) & mask; ; k = (k + 1) & mask {
		sl := &s.slots[k]
		if sl.len == 0 {
			sl.off, sl.len, sl.hash, sl.val = int32(a), int32(b-a), h, s.n
			s.n++
			s.used++
			if 2*s.used > len(s.slots) {
				s.grow()
			}
			return s.n - 1
		}
		if sl.hash == h && int(sl.len) == len(id) && string(s.src[sl.off:sl.off+sl.len]) == string(id) {
			return sl.val
		}
	}
}

func (s *ssaNames) grow() {
	old := s.slots
	s.slots = make([]ssaSlot, 2*len(old))
	mask := len(s.slots) - 1
	for _, sl := range old {
		if sl.len == 0 {
			continue
		}
		k := int(sl.hash) & mask
		for s.slots[k].len != 0 {
			k = (k + 1) & mask
		}
		s.slots[k] = sl
	}
}

// canonMLIR appends the canonical form of the StableHLO/MLIR text src to dst
// and returns it with the module's symbol name (the display name).
func (c *Canonicalizer) canonMLIR(dst, src []byte) ([]byte, string, error) {
	return c.canonMLIRPass(dst, src)
}

// canonMLIRPass is one scan of src (see canonMLIR).
func (c *Canonicalizer) canonMLIRPass(dst, src []byte) ([]byte, string, error) {
	e := emitter{src: src, out: dst, base: len(dst)}
	base := e.base
	c.ssa.reset(src)
	var name string
	// "module" is searched for lazily (it is turned off after the first
	// top-level one). The attribute names the scan drops, "jax." and
	// "mhlo.layout_mode", are found by the word loop instead, through a
	// byte pair that is rare in real modules: "x." (only in "jax." in the
	// corpus and the generated module) and "_m" (about twice as common as
	// "layout_mode" in the corpus, which is most of it in JAX output).
	// Searching for them separately by a single byte ('j', 'y') stopped at
	// every "jit(" location string and cost a quarter of the scan.
	mod := lazyPattern{pat: "module"}
	n := len(src)
	lim := 0
	// Leading whitespace goes (trailing whitespace is trimmed at the end).
	i := skipSpace(src, 0)
	e.start = i
	mod.refresh(src, i)
	lim = mod.next
	// from is where the scan last resumed after a handler: a pattern is
	// recognized only if all of it lies in bytes the scan passed over as
	// plain text (not inside a string or name that a handler skipped, nor
	// partly before a position where a rejected candidate resumed).
	from := i
	for i < n {
		// The hot loop: eight bytes at a time to the next byte that may
		// start something to rewrite; everything else stays in the run.
		// A '(' matters only after "loc": flag it only behind a 'c' (a
		// false flag just stops the word loop early; the handlers check);
		// likewise '.' behind 'x' ("jax.") and 'm' behind '_' ("_mode").
		for i+8 <= lim && i > 0 {
			x := load64(src, i)
			y := load64(src, i-1)
			if m := hasByte8(x, '\n') | hasByte8(x, '"') | hasByte8(x, '/') | hasByte8(x, '%') |
				hasByte8(x, '#') | hasByte8(x, '(')&hasByte8(y, 'c') |
				hasByte8(x, '.')&hasByte8(y, 'x') | hasByte8(x, 'm')&hasByte8(y, '_'); m != 0 {
				i += firstFlag(m)
				break
			}
			i += 8
		}
		for i < lim && mlirClass[src[i]] == cPlain {
			i++
		}
		if i >= n {
			break
		}
		if i == lim {
			// A "module" candidate. No dropped attribute name can be
			// pending here: "module" cannot start inside "jax" or
			// "mhlo.layout_", and one starting at the 'm' of
			// "mhlo.layout_mode" is neither a token start nor leaves
			// the attribute name a token end.
			if !e.tokenStartAt(i) || !tokenEnd(src, i+6) {
				i++
			} else {
				mod.off = true
				e.flush(i)
				switch j := skipTrivia(src, i+6, false); {
				case hasByte(e.out[base:], '{'):
					i += 6
				case j < n && src[j] == '@':
					end, sym := symbolAt(src, j+1)
					if end < 0 {
						i += 6 // not a name: keep what follows verbatim
						break
					}
					name = sym
					e.flush(i + 6)
					e.pending = true
					e.start = skipHSpace(src, end)
					i = e.start
				default:
					i += 6
				}
			}
			mod.refresh(src, i)
			lim = mod.next
			from = i
			continue
		}
		switch mlirClass[src[i]] {
		case cDot:
			// "jax." ends here if the three bytes before it are "jax"
			// and were scanned as plain text.
			p := i - 3
			if p < from || src[i-1] != 'x' || src[i-2] != 'a' || src[i-3] != 'j' {
				i++
				continue
			}
			k := i + 1
			var attr int
			switch {
			case hasPrefixAt(src, k, "result_info"):
				attr = k + len("result_info")
			case hasPrefixAt(src, k, "arg_info"):
				attr = k + len("arg_info")
			}
			if attr == 0 || !e.tokenStartAt(p) || !tokenEnd(src, attr) {
				i++ // no other pattern or stop starts inside "jax"
				break
			}
			i = e.dropAttr(p, attr, "")
		case cEm:
			// Likewise the 'm' of "mhlo.layout_mode".
			p := i - len("mhlo.layout_")
			if p < from || src[i-1] != '_' || !hasPrefixAt(src, p, "mhlo.layout_mode") {
				i++
				continue
			}
			attr := p + len("mhlo.layout_mode")
			if !e.tokenStartAt(p) || !tokenEnd(src, attr) {
				i++ // nor inside "mhlo.layout_"
				break
			}
			i = e.dropAttr(p, attr, `"default"`)
		case cParen:
			p := i - 3
			if p < e.start || src[p] != 'l' || src[p+1] != 'o' || src[p+2] != 'c' || !e.tokenStartAt(p) {
				i++
				break
			}
			// The common `loc(#loc12)` ends at the first ')': no call.
			end := i + 1
			if end < n && src[end] == '#' {
				end++
				for end < n && identChar[src[end]] {
					end++
				}
				if end < n && src[end] == ')' {
					end++
				} else {
					end = skipBalanced(src, i, '(', ')')
				}
			} else {
				end = skipBalanced(src, i, '(', ')')
			}
			if end < 0 {
				return nil, "", fmt.Errorf("%w: unbalanced loc( at byte %d", ErrModule, p)
			}
			// Inlined e.drop(p, end, false).
			e.flush(p)
			for len(e.out) > e.base && isSpace(e.out[len(e.out)-1]) {
				e.out = e.out[:len(e.out)-1]
			}
			e.pending = true
			for end < n && (src[end] == ' ' || src[end] == '\t' || src[end] == '\r') {
				end++
			}
			e.start = end
			i = end
		case cSpace:
			// Inlined e.newline: one call (the run copy) per line.
			e.flush(i)
			for len(e.out) > e.base && isSpace(e.out[len(e.out)-1]) {
				e.out = e.out[:len(e.out)-1]
			}
			e.pending = true
			for i < n && isSpace(src[i]) {
				i++
			}
			e.start = i
		case cQuote:
			// Short strings end within the next word: no call.
			if i+9 <= n {
				if m := hasByte8(load64(src, i+1), '"') | hasByte8(load64(src, i+1), '\\'); m != 0 {
					if k := i + 1 + firstFlag(m); src[k] == '"' {
						i = k + 1
						break
					}
				}
			}
			end := skipString(src, i)
			if end < 0 {
				return nil, "", fmt.Errorf("%w: unterminated string at byte %d", ErrModule, i)
			}
			i = end
		case cSlash:
			if i+1 < n && src[i+1] == '/' {
				e.drop(i, lineEnd(src, i), false)
				i = e.start
			} else {
				i++
			}
		case cPercent:
			j := i + 1
			v := 0
			if j < n && isDigit(src[j]) {
				for j < n && isDigit(src[j]) {
					v = v*10 + int(src[j]-'0')
					j++
				}
			} else {
				for j < n && identChar[src[j]] {
					j++
				}
			}
			if j == i+1 || !e.tokenStartAt(i) {
				i++
				continue
			}
			var k int32
			if d := j - i - 1; isDigit(src[i+1]) && (src[i+1] != '0' || d == 1) && d <= 5 {
				k = c.ssa.lookupNum(v)
			} else {
				k = c.ssa.lookup(i+1, j)
			}
			e.flush(i)
			e.emitSSA(int(k))
			e.start = j
			i = j
		case cHash:
			end := -1
			if e.tokenStartAt(i) {
				end = locAliasEnd(src, i)
			}
			if end == -2 {
				return nil, "", fmt.Errorf("%w: unbalanced loc( in alias at byte %d", ErrModule, i)
			}
			if end < 0 {
				i++
				continue
			}
			e.drop(i, end, false)
			i = e.start
		}
		if i > lim {
			mod.refresh(src, i)
			lim = mod.next
		}
		from = i
	}
	e.flush(n)
	e.trimSpace()
	out, late, changed := stripModuleNames(e.out, base)
	if name == "" {
		name = late
	}
	// Only garbage gets here (a name glued to the keyword through removed
	// constructs): scan the result again so that the output is a fixed
	// point. Each round removes a name, so this ends.
	for round := 0; changed && round < 8; round++ {
		again := append([]byte(nil), out[base:]...)
		var err error
		out, _, err = c.canonMLIRPass(out[:base], again)
		if err != nil {
			return nil, "", err
		}
		out, _, changed = stripModuleNames(out, base)
	}
	return out, name, nil
}

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
	for j < len(src) && identChar[src[j]] {
		j++
	}
	if j == i+1 {
		return -1
	}
	j = skipTrivia(src, j, false)
	if j >= len(src) || src[j] != '=' {
		return -1
	}
	j = skipTrivia(src, j+1, false)
	if !hasPrefixAt(src, j, "loc(") {
		return -1
	}
	end := skipBalanced(src, j+3, '(', ')')
	if end < 0 {
		return -2
	}
	return end
}

// symbolAt parses an MLIR symbol name after '@' at src[i]: a bare name or a
// string literal. It returns the end index and the name (unquoted text).
func symbolAt(src []byte, i int) (int, string) {
	if i < len(src) && src[i] == '"' {
		end := skipString(src, i)
		if end < 0 {
			return -1, ""
		}
		return end, string(src[i+1 : end-1])
	}
	j := i
	for j < len(src) && identChar[src[j]] {
		j++
	}
	if j == i {
		return -1, ""
	}
	return j, string(src[i:j])
}

// lineEnd returns the index of the '\n' ending the line containing i, or
// len(src).
func lineEnd(src []byte, i int) int {
	if k := indexByte(src, i, '\n'); k >= 0 {
		return k
	}
	return len(src)
}

func hasByte(b []byte, c byte) bool { return indexByte(b, 0, c) >= 0 }
