package xlacanon

import (
	"fmt"
	"strconv"
)

// ssaNames renames MLIR SSA values (%0, %c, %cst_3, %arg0 …) to %0, %1, … in
// order of first appearance. The mapping is injective on names, so the
// renamed text parses to the same IR: printer-chosen names carry no meaning.
// All names, numeric ones too (one path for both keeps the scan loop
// small), go to an open-addressing table keyed by their bytes (no
// allocation, no map: maps are slow under wasm). Each new name's output text is rendered once (text), so that
// emitting it is a single word store.
type ssaNames struct {
	text  []uint64
	slots []ssaSlot
	used  int
	n     int32
	src   []byte
}

type ssaSlot struct {
	off, len int32 // name bytes in src; len 0 = empty slot
	hash     uint32
	val      int32
	key      uint64 // the name's bytes if it is at most eight long (see shortKey)
}

func (s *ssaNames) reset(src []byte) {
	s.text = s.text[:0]
	clear(s.slots)
	if len(s.slots) == 0 {
		s.slots = make([]ssaSlot, 256)
	}
	s.used = 0
	s.n = 0
	s.src = src
}

// next assigns the next new number and renders its text.
func (s *ssaNames) next() int32 {
	s.text = append(s.text, ssaText(s.n))
	s.n++
	return s.n - 1
}

// ssaText returns the output text of the new number k, "%k", as the bytes
// of a little-endian word with their count in its top byte, or 0 if they do
// not fit in seven bytes (k >= 1e6). Stored as a whole word, the text is
// followed by one garbage byte, overwritten by the next output.
func ssaText(k int32) uint64 {
	if k >= 1e6 {
		return 0
	}
	var w [8]byte
	w[0] = '%'
	t := strconv.AppendInt(w[:1], int64(k), 10)
	w[7] = byte(len(t))
	return load64(w[:], 0)
}

// shortKey returns the bytes of the name src[a:b] (b-a <= 8) as a
// little-endian word, zero above the name: equal names of equal length, and
// only they, have equal keys. One masked word load when the word is in src.
func shortKey(src []byte, a, b int) uint64 {
	if a+8 <= len(src) {
		return load64(src, a) & (1<<(8*uint(b-a)) - 1)
	}
	var k uint64
	for i := b - 1; i >= a; i-- {
		k = k<<8 | uint64(src[i])
	}
	return k
}

// shortHash hashes a shortKey (Fibonacci hashing: the high half of the
// product depends on all key bytes).
func shortHash(key uint64) uint32 { return uint32((key * 0x9e3779b97f4a7c15) >> 32) }

// lookup returns the new number of the SSA name src[a:b] (without '%').
// Names of up to eight bytes (most: %arg0, %cst_1, %c) are hashed and
// compared as one word (shortKey); longer ones byte by byte.
func (s *ssaNames) lookup(a, b int) int32 {
	id := s.src[a:b]
	var h uint32
	var key uint64
	if len(id) <= 8 {
		key = shortKey(s.src, a, b)
		h = shortHash(key)
	} else {
		h = uint32(2166136261)
		for _, c := range id {
			h = (h ^ uint32(c)) * 16777619
		}
	}
	mask := len(s.slots) - 1
	for k := int(h) & mask; ; k = (k + 1) & mask {
		sl := &s.slots[k]
		if sl.len == 0 {
			v := s.next()
			sl.off, sl.len, sl.hash, sl.key, sl.val = int32(a), int32(b-a), h, key, v
			s.used++
			if 2*s.used > len(s.slots) {
				s.grow()
			}
			return v
		}
		if int(sl.len) == len(id) && (len(id) <= 8 && sl.key == key ||
			len(id) > 8 && sl.hash == h && string(s.src[sl.off:sl.off+sl.len]) == string(id)) {
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
			x := loadInside(src, i) // 0 < i and i+8 <= lim <= n
			y := loadInside(src, i-1)
			if m := (hasByte8Raw(x, '\n') | hasByte8Raw(x, '"') | hasByte8Raw(x, '/') | hasByte8Raw(x, '%') |
				hasByte8Raw(x, '#') | hasByte8Raw(x, '(')&hasByte8Raw(y, 'c') |
				hasByte8Raw(x, '.')&hasByte8Raw(y, 'x') | hasByte8Raw(x, 'm')&hasByte8Raw(y, '_')) & hi8; m != 0 {
				i += firstFlag(m)
				break
			}
			i += 8
		}
		// Mostly the word loop stopped on a byte to handle: skip the
		// byte loop (it is for the last bytes before lim and for false
		// flags) with one test that falls through, rather than entering
		// it to leave at once (a taken jump, costly under wasm).
		if i+8 > lim || mlirClass[src[i]] == cPlain {
			for i < lim && mlirClass[src[i]] == cPlain {
				i++
			}
			if i >= n {
				break
			}
		}
		if i == lim {
			// A "module" candidate. No dropped attribute name can be
			// pending here: "module" cannot start inside "jax" or
			// "mhlo.layout_", and one starting at the 'm' of
			// "mhlo.layout_mode" is neither a token start nor leaves
			// the attribute name a token end.
			var sym string
			if i, sym = e.moduleAt(i); i >= 0 {
				mod.off = true
				name = sym
			} else {
				i = -i
			}
			mod.refresh(src, i)
			lim = mod.next
			from = i
			continue
		}
		switch mlirClass[src[i]] {
		case cDot, cEm:
			// The end of "jax." or the 'm' of "mhlo.layout_mode", maybe
			// (rare: in a function of its own, keeping this one small).
			j := e.droppedAttrAt(i, from)
			if j < 0 {
				i++
				continue
			}
			i = j
		case cParen:
			p := i - 3
			if p < e.start || src[p] != 'l' || src[p+1] != 'o' || src[p+2] != 'c' || !e.tokenStartAt(p) {
				i++
				break
			}
			// The common `loc(#loc12)` holds no '(' or '"': then its end
			// is the first ')', found in the next two words without a
			// call (skipBalanced stops at the first of the three too).
			end := -1
			if i+17 <= n {
				off := i + 1
				m := (hasByte8Raw(loadInside(src, off), '(') | hasByte8Raw(loadInside(src, off), ')') | hasByte8Raw(loadInside(src, off), '"')) & hi8
				if m == 0 {
					off += 8
					m = (hasByte8Raw(loadInside(src, off), '(') | hasByte8Raw(loadInside(src, off), ')') | hasByte8Raw(loadInside(src, off), '"')) & hi8
				}
				if k := off + firstFlag(m); m != 0 && src[k] == ')' {
					end = k + 1
				}
			}
			if end < 0 {
				end = skipBalanced(src, i, '(', ')')
			}
			if end < 0 {
				return nil, "", fmt.Errorf("%w: unbalanced loc( at byte %d", ErrModule, p)
			}
			e.flush(p)
			e.trimSpace()
			e.pending = true
			// Inlined e.drop(p, end, false), except that the blanks
			// after it go up to the next non-blank byte even across line
			// breaks: a '\n' here (most locs end a line) would be a stop
			// doing nothing more (its run is empty, the output is
			// trimmed, a separator is pending), so it costs no stop.
			e.start = skipSpaceWord(src, end)
			i = e.start
		case cSpace:
			// Inlined e.newline: one call (the run copy) per line.
			e.flush(i)
			e.trimSpace()
			e.pending = true
			// The blanks after it (mostly an indentation shorter than a
			// word) in one word test; the loop goes on for longer runs.
			if i+8 <= n {
				i += leading(spaceMask(loadInside(src, i)))
			}
			for i < n && isSpace(src[i]) {
				i++
			}
			e.start = i
		case cQuote:
			// Short strings end within the next word: no call.
			if i+9 <= n {
				if m := (hasByte8Raw(loadInside(src, i+1), '"') | hasByte8Raw(loadInside(src, i+1), '\\')) & hi8; m != 0 {
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
			// The common case, a name of one to seven bytes seen before
			// and sitting in its home slot (see lookup), is handled here
			// in a few straight lines; everything else is left to ssaAt,
			// out of this function: under wasm, every branch and every
			// line of code in this loop costs at every stop. A name is
			// digits, or else name bytes (a numeric name ends at the
			// first non-digit): measured on the word after the '%', its
			// bytes (zero above) are its table key.
			if i+9 <= n {
				x := loadInside(src, i+1)
				m := identMask(x)
				if isDigit(src[i+1]) {
					m = digitMask(x)
				}
				d := leading(m)
				key := x & (1<<(8*uint(d)) - 1)
				sl := &c.ssa.slots[int(shortHash(key))&(len(c.ssa.slots)-1)]
				if int(sl.len) == d && sl.key == key && uint(d-1) < 7 && e.tokenStartAt(i) {
					e.flush(i)
					if e.pending { // inlined e.sep('%')
						e.pending = false
						if o := len(e.out); o > e.base && needSep(e.out[o-1], '%') {
							e.out = append(e.out, ' ')
						}
					}
					// The rendered name is one word store (see ssaText).
					if w, o := c.ssa.text[sl.val], len(e.out); w != 0 && cap(e.out)-o >= 8 {
						store64(e.out[:o+8], o, w)
						e.out = e.out[:o+int(w>>56)]
					} else {
						e.emitSSA(int(sl.val))
					}
					i += 1 + d
					e.start = i
					break
				}
			}
			j := c.ssaAt(&e, i)
			if j < 0 {
				i++
				continue
			}
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
			// Inlined e.drop(i, end, false).
			e.flush(i)
			e.trimSpace()
			e.pending = true
			// As for loc(: the line break after it costs no stop.
			e.start = skipSpaceWord(src, end)
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

// moduleAt handles a "module" candidate at src[i] (see canonMLIRPass): if
// it is the top-level module keyword, it drops the symbol name after it and
// returns where the scan goes on and the name; otherwise it returns minus
// where the scan goes on. The rare case lives here to keep the scan loop
// small (under wasm, the code of a large function is slower throughout).
func (e *emitter) moduleAt(i int) (int, string) {
	src, n := e.src, len(e.src)
	if !e.tokenStartAt(i) || !tokenEnd(src, i+6) {
		return -(i + 1), ""
	}
	e.flush(i)
	switch j := skipTrivia(src, i+6, false); {
	case hasByte(e.out[e.base:], '{'):
		return i + 6, ""
	case j < n && src[j] == '@':
		end, sym := symbolAt(src, j+1)
		if end < 0 {
			return i + 6, "" // not a name: keep what follows verbatim
		}
		e.flush(i + 6)
		e.pending = true
		e.start = skipHSpace(src, end)
		return e.start, sym
	}
	return i + 6, ""
}

// ssaAt handles a '%' at src[i] that the scan's fast path did not (see
// canonMLIRPass): a name not seen before, longer than seven bytes, outside
// its home slot or near the end of src, or no name at all. It returns -1 if
// there is no name there, else where the scan goes on.
func (c *Canonicalizer) ssaAt(e *emitter, i int) int {
	src, n := e.src, len(e.src)
	j := i + 1
	if j < n && isDigit(src[j]) {
		for j < n && isDigit(src[j]) {
			j++
		}
	} else {
		for j < n && identChar[src[j]] {
			j++
		}
	}
	if j == i+1 || !e.tokenStartAt(i) {
		return -1
	}
	k := c.ssa.lookup(i+1, j)
	e.flush(i)
	e.emitSSA(int(k))
	e.start = j
	return j
}

// droppedAttrAt handles a stop at the '.' of "jax." or the 'm' of
// "mhlo.layout_mode" (see canonMLIRPass): the attribute name is recognized
// only if the bytes before spell it and were scanned as plain text (it
// starts at or after from). It returns -1 if there is no name, else where
// the scan goes on.
func (e *emitter) droppedAttrAt(i, from int) int {
	src := e.src
	if src[i] == '.' {
		p := i - 3
		if p < from || src[i-1] != 'x' || src[i-2] != 'a' || src[i-3] != 'j' {
			return -1
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
			return i + 1 // no other pattern or stop starts inside "jax"
		}
		return e.dropAttr(p, attr, "")
	}
	p := i - len("mhlo.layout_")
	if p < from || src[i-1] != '_' || !hasPrefixAt(src, p, "mhlo.layout_mode") {
		return -1
	}
	attr := p + len("mhlo.layout_mode")
	if !e.tokenStartAt(p) || !tokenEnd(src, attr) {
		return i + 1 // nor inside "mhlo.layout_"
	}
	return e.dropAttr(p, attr, `"default"`)
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
