package xlacanon

import "fmt"

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
	var dropAt, dropEnd int // what the code at drop removes
	for i < n {
		// The hot loop: eight bytes at a time to the next byte that may
		// start something to rewrite; everything else stays in the run.
		// A '(' matters only after "loc": flag it only behind a 'c' (a
		// false flag just stops the word loop early; the handlers check);
		// likewise '.' behind 'x' ("jax.") and 'm' behind '_' ("_mode").
		// Four words per iteration: under wasm the loop's back edge goes
		// through Go's dispatch loop and the host's stop check, and its
		// exits are jumps forward (cheap since the host's rewrite). The
		// classifier is written out at each word: as a function it costs
		// too much for Go to inline.
		for i+32 <= lim && i > 0 { // 0 < i and i+32 <= lim <= n: the loads below are in src
			{
				x, y := loadInside(src, i), loadInside(src, i-1)
				if m := (hasByte8Raw(x, '\n') | hasByte8Raw(x, '"') | hasByte8Raw(x, '/') | hasByte8Raw(x, '%') |
					hasByte8Raw(x, '#') | hasByte8Raw(x, '(')&hasByte8Raw(y, 'c') |
					hasByte8Raw(x, '.')&hasByte8Raw(y, 'x') | hasByte8Raw(x, 'm')&hasByte8Raw(y, '_')) & hi8; m != 0 {
					i += firstFlag(m)
					goto stopped
				}
			}
			{
				x, y := loadInside(src, i+8), loadInside(src, i+8-1)
				if m := (hasByte8Raw(x, '\n') | hasByte8Raw(x, '"') | hasByte8Raw(x, '/') | hasByte8Raw(x, '%') |
					hasByte8Raw(x, '#') | hasByte8Raw(x, '(')&hasByte8Raw(y, 'c') |
					hasByte8Raw(x, '.')&hasByte8Raw(y, 'x') | hasByte8Raw(x, 'm')&hasByte8Raw(y, '_')) & hi8; m != 0 {
					i += 8 + firstFlag(m)
					goto stopped
				}
			}
			{
				x, y := loadInside(src, i+16), loadInside(src, i+16-1)
				if m := (hasByte8Raw(x, '\n') | hasByte8Raw(x, '"') | hasByte8Raw(x, '/') | hasByte8Raw(x, '%') |
					hasByte8Raw(x, '#') | hasByte8Raw(x, '(')&hasByte8Raw(y, 'c') |
					hasByte8Raw(x, '.')&hasByte8Raw(y, 'x') | hasByte8Raw(x, 'm')&hasByte8Raw(y, '_')) & hi8; m != 0 {
					i += 16 + firstFlag(m)
					goto stopped
				}
			}
			{
				x, y := loadInside(src, i+24), loadInside(src, i+24-1)
				if m := (hasByte8Raw(x, '\n') | hasByte8Raw(x, '"') | hasByte8Raw(x, '/') | hasByte8Raw(x, '%') |
					hasByte8Raw(x, '#') | hasByte8Raw(x, '(')&hasByte8Raw(y, 'c') |
					hasByte8Raw(x, '.')&hasByte8Raw(y, 'x') | hasByte8Raw(x, 'm')&hasByte8Raw(y, '_')) & hi8; m != 0 {
					i += 24 + firstFlag(m)
					goto stopped
				}
			}
			i += 32
		}
		for i+8 <= lim && i > 0 { // 0 < i and i+8 <= lim <= n
			x, y := loadInside(src, i), loadInside(src, i-1)
			if m := (hasByte8Raw(x, '\n') | hasByte8Raw(x, '"') | hasByte8Raw(x, '/') | hasByte8Raw(x, '%') |
				hasByte8Raw(x, '#') | hasByte8Raw(x, '(')&hasByte8Raw(y, 'c') |
				hasByte8Raw(x, '.')&hasByte8Raw(y, 'x') | hasByte8Raw(x, 'm')&hasByte8Raw(y, '_')) & hi8; m != 0 {
				i += firstFlag(m)
				break
			}
			i += 8
		}
	stopped:
		// Mostly the word loop stopped on a byte to handle: skip the
		// byte loop (it is for the last bytes before lim and for false
		// flags) with one test that falls through, rather than entering
		// it to leave at once (a taken jump, costly under wasm).
		// (Unchecked byte loads: i < lim <= n, by the first test or the
		// loop condition.)
		if i+8 > lim || mlirClass[byteInside(src, i)] == cPlain {
			for i < lim && mlirClass[byteInside(src, i)] == cPlain {
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
		switch mlirClass[byteInside(src, i)] { // i < n: i+8 <= lim above, or the break at i >= n
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
			// Unchecked: 0 <= e.start <= p and p+2 < i < n.
			if p < e.start || byteInside(src, p) != 'l' || byteInside(src, p+1) != 'o' || byteInside(src, p+2) != 'c' || !e.tokenStartAt(p) {
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
				if k := off + firstFlag(m); m != 0 && byteInside(src, k) == ')' { // k < off+8 <= i+17 <= n
					end = k + 1
				}
			}
			if end < 0 {
				end = skipBalanced(src, i, '(', ')')
			}
			if end < 0 {
				return nil, "", fmt.Errorf("%w: unbalanced loc( at byte %d", ErrModule, p)
			}
			dropAt, dropEnd = p, end
			goto drop
		case cSpace:
			// e.newline: the line break and the blanks after it.
			dropAt, dropEnd = i, i
			goto drop
		case cQuote:
			// Short strings end within the next word: no call.
			if i+9 <= n {
				if m := (hasByte8Raw(loadInside(src, i+1), '"') | hasByte8Raw(loadInside(src, i+1), '\\')) & hi8; m != 0 {
					if k := i + 1 + firstFlag(m); byteInside(src, k) == '"' { // k < i+9 <= n
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
				if isDigit(byteInside(src, i+1)) { // i+9 <= n
					m = digitMask(x)
				}
				d := leading(m)
				key := x & (1<<(8*uint(d)) - 1)
				sl := c.ssa.homeSlot(key)
				if int(sl.len) == d && sl.key == key && uint(d-1) < 7 && e.tokenStartAt(i) {
					// e.flush(i) with copyRun's common case written out
					// (no call: this is the most frequent stop).
					if st, o := e.start, len(e.out); i > st {
						if !e.pending && i-st <= 32 && cap(e.out)-o >= 32 && cap(src)-st >= 32 {
							move32At(e.out, o, src, st)
							e.out = e.out[:o+i-st]
						} else {
							e.copyRun(i)
						}
					}
					e.start = i
					if e.pending { // inlined e.sep('%')
						e.pending = false
						if o := len(e.out); o > e.base && needSep(byteInside(e.out, o-1), '%') { // 0 <= e.base < o
							e.out = append(e.out, ' ')
						}
					}
					// The rendered name is one word store (see ssaText).
					if w, o := c.ssa.text[sl.val], len(e.out); w != 0 && cap(e.out)-o >= 8 {
						store64Inside(e.out, o, w) // o+8 <= cap(e.out), tested just before
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
			dropAt, dropEnd = i, end
			goto drop
		}
		if i > lim {
			mod.refresh(src, i)
			lim = mod.next
		}
		from = i
		continue
	drop:
		// Inlined e.drop(dropAt, dropEnd, false) for a loc(...), a #loc
		// alias or a line break, except that the blanks after it go up to
		// the next non-blank byte even across line breaks: a '\n' there
		// (most locs end a line) would be a stop doing nothing more (its
		// run is empty, the output is trimmed, a separator is pending), so
		// it costs no stop. One copy of this code for the three cases,
		// with e.flush's common case written out (no call), and the
		// blanks (mostly a line break and an indentation shorter than a
		// word) measured as one word; the loop goes on for longer runs.
		if st, o := e.start, len(e.out); dropAt > st {
			if !e.pending && dropAt-st <= 32 && cap(e.out)-o >= 32 && cap(src)-st >= 32 {
				move32At(e.out, o, src, st)
				e.out = e.out[:o+dropAt-st]
			} else {
				e.copyRun(dropAt)
			}
		}
		e.trimSpace()
		e.pending = true
		i = dropEnd
		if i+8 <= n {
			i += leading(spaceMask(loadInside(src, i)))
		}
		for i < n && isSpace(byteInside(src, i)) { // 0 <= i < n
			i++
		}
		e.start = i
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
