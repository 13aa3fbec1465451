package xlacanon

// Byte classes of the module scanners. Class 0 bytes are copied in bulk;
// any other class stops the fast loop.
const (
	cPlain   = iota
	cSpace   // '\n' (a line break; other whitespace inside a line is kept)
	cQuote   // '"'
	cSlash   // '/' (a comment may start)
	cPercent // '%' (MLIR SSA value name)
	cHash    // '#' (MLIR alias definition)
	cParen   // '(' (MLIR: may end "loc(")
	cDot     // '.' (MLIR: may end "jax.")
	cEm      // 'm' (MLIR: may be the 'm' of "mhlo.layout_mode")
	cEquals  // '=' (HLO: may end "metadata=" or "stack_frame_id=")
)

var (
	mlirClass [256]uint8
	hloClass  [256]uint8
	identChar [256]bool // [A-Za-z0-9_$.-]: bytes that continue a name
	wordChar  [256]bool // identChar plus sigils that glue to a name
)

func init() {
	mlirClass['\n'] = cSpace
	hloClass['\n'] = cSpace
	mlirClass['"'] = cQuote
	hloClass['"'] = cQuote
	mlirClass['/'] = cSlash
	hloClass['/'] = cSlash
	mlirClass['%'] = cPercent
	mlirClass['#'] = cHash
	mlirClass['('] = cParen
	mlirClass['.'] = cDot
	mlirClass['m'] = cEm
	hloClass['='] = cEquals
	for c := 0; c < 256; c++ {
		b := byte(c)
		if b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '$' || b == '.' || b == '-' {
			identChar[c] = true
			wordChar[c] = true
		}
	}
	for _, c := range []byte("%@#^!") {
		wordChar[c] = true
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// noSpaceAfter and noSpaceBefore say where a separator is never needed: the
// lexers of MLIR and HLO ignore whitespace next to these brackets, so
// re-wrapped text (a line broken after "(" or before ")") canonicalizes like
// the original.
func noSpaceAfter(c byte) bool  { return c == '(' || c == '[' || c == '{' }
func noSpaceBefore(c byte) bool { return c == ')' || c == ']' || c == '}' || c == ',' }

// skipString returns the index just past the string literal whose opening
// quote is at s[i], or -1 if it is not terminated. A quote preceded by an odd
// number of backslashes is escaped.
func skipString(s []byte, i int) int {
	// Most strings are short: look for the closing quote (or a backslash,
	// which needs the general loop) in the next eight words without a
	// call; longer strings go on with indexByte (memchr natively).
	for j := i + 1; j+8 <= len(s) && j < i+65; j += 8 {
		if m := hasByte8(loadInside(s, j), '"') | hasByte8(loadInside(s, j), '\\'); m != 0 {
			if k := j + firstFlag(m); s[k] == '"' {
				return k + 1
			}
			break
		}
	}
	j := i + 1
	for {
		j = indexByte(s, j, '"')
		if j < 0 {
			return -1
		}
		b := 0
		for p := j - 1; p > i && s[p] == '\\'; p-- {
			b++
		}
		if b%2 == 0 {
			return j + 1
		}
		j++
	}
}

// skipBalanced returns the index just past the bracket closing the one at
// s[i] (open), counting only open/close outside string literals, or -1 if it
// is not closed. It moves eight bytes at a time between interesting bytes.
func skipBalanced(s []byte, i int, open, close byte) int {
	depth := 0
	j := i
	for j < len(s) {
		if j+8 <= len(s) {
			x := loadInside(s, j)
			m := hasByte8(x, open) | hasByte8(x, close) | hasByte8(x, '"')
			if m == 0 {
				j += 8
				continue
			}
			j += firstFlag(m)
		}
		switch s[j] {
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return j + 1
			}
		case '"':
			k := skipString(s, j)
			if k < 0 {
				return -1
			}
			j = k - 1
		}
		j++
	}
	return -1
}

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(s []byte, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// skipTrivia returns the index of the first byte at or after i that is
// neither whitespace nor inside a // comment (or, if block, a /* */ comment).
func skipTrivia(s []byte, i int, block bool) int {
	for {
		i = skipSpace(s, i)
		switch {
		case hasPrefixAt(s, i, "//"):
			i = lineEnd(s, i)
		case block && hasPrefixAt(s, i, "/*"):
			k := indexByte(s, i+2, '/')
			for k >= 0 && s[k-1] != '*' {
				k = indexByte(s, k+1, '/')
			}
			if k < 0 {
				return len(s)
			}
			i = k + 1
		default:
			return i
		}
	}
}

// hasPrefixAt reports whether s[i:] starts with p.
func hasPrefixAt(s []byte, i int, p string) bool {
	return len(s)-i >= len(p) && string(s[i:i+len(p)]) == p
}

// tokenStart reports whether position i of s begins a token (the previous
// byte cannot be part of the same name).
func tokenStart(s []byte, i int) bool { return i == 0 || !wordChar[s[i-1]] }

// tokenStartAt is tokenStart in the output's context: when position i
// starts the pending run (what preceded it was removed or was whitespace),
// the byte before it in the output decides, so that canonicalizing the
// output again makes the same decision.
func (e *emitter) tokenStartAt(i int) bool {
	if i > e.start {
		return !wordChar[e.src[i-1]]
	}
	if e.pending || len(e.out) == e.base {
		return true
	}
	return !wordChar[e.out[len(e.out)-1]]
}

// tokenEnd reports whether position i of s ends a name.
func tokenEnd(s []byte, i int) bool { return i >= len(s) || !identChar[s[i]] }

// lazyPattern tracks the next occurrence of a literal in the source, so that
// rare keywords are found by searching for one rare byte of theirs (anchor)
// instead of by inspecting every byte in the scanner loop.
type lazyPattern struct {
	pat    string
	anchor int  // index in pat of the byte searched for
	next   int  // index of the next occurrence at or after the last refresh; len(src) if none
	off    bool // no more occurrences (or no longer wanted)
	init   bool // next has been computed once
}

func (p *lazyPattern) refresh(src []byte, i int) {
	if p.off {
		p.next = len(src)
		return
	}
	if p.init && p.next >= i {
		return
	}
	p.init = true
	c := p.pat[p.anchor]
	for from := i + p.anchor; ; {
		k := -1
		if from < len(src) {
			k = indexByte(src, from, c)
		}
		if k < 0 {
			p.next = len(src)
			p.off = true
			return
		}
		if hasPrefixAt(src, k-p.anchor, p.pat) {
			p.next = k - p.anchor
			return
		}
		from = k + 1
	}
}

// emitter builds the canonical text: it copies runs of unchanged source bytes
// in bulk and collapses every run of insignificant whitespace (and every
// removed construct) into at most one space.
type emitter struct {
	src     []byte
	out     []byte
	base    int  // len(out) before the module: the output of this scan is out[base:]
	start   int  // start of the verbatim run not yet copied
	pending bool // a separator is owed before the next output byte
}

// flush copies src[start:i] to the output and moves start to i. It is small
// enough to inline: the scanners call it at almost every stop, and calls are
// expensive under wasm.
func (e *emitter) flush(i int) {
	if i > e.start {
		e.copyRun(i)
	}
	e.start = i
}

// copyRun copies the non-empty run src[start:i], settling a pending
// separator first. It runs at almost every stop and, under wasm, every call
// costs more than the work of a typical stop, so it calls nothing in the
// common case: the separator test is inlined, and a run of up to 32 bytes
// (most runs between two stops) is moved as 32 bytes (no branch on its
// length), reading and writing past the run within the capacities of src
// and out: the bytes written past out's new length are overwritten later.
func (e *emitter) copyRun(i int) {
	s, o := e.start, len(e.out)
	if e.pending {
		e.pending = false
		if o > e.base && needSep(byteInside(e.out, o-1), e.src[s]) { // 0 <= e.base < o
			e.out = append(e.out, ' ')
			o++
		}
	}
	if n := i - s; n <= 32 && cap(e.out)-o >= 32 && cap(e.src)-s >= 32 {
		move32At(e.out, o, e.src, s)
		e.out = e.out[:o+n]
		return
	}
	e.out = appendRun(e.out, e.src[s:i])
}

// needSep reports whether a pending separator between the output byte last
// and the next output byte c must be written.
func needSep(last, c byte) bool { return !isSpace(last) && !noSpaceAfter(last) && !noSpaceBefore(c) }

// sep settles a pending separator before an output byte c.
func (e *emitter) sep(c byte) {
	e.pending = false
	if o := len(e.out); o > e.base && needSep(e.out[o-1], c) {
		e.out = append(e.out, ' ')
	}
}

// emit appends a rewritten token.
func (e *emitter) emit(s string) {
	if e.pending {
		e.sep(s[0])
	}
	e.out = append(e.out, s...)
}

// emitSSA appends "%" and the decimal n (small numbers without a loop).
func (e *emitter) emitSSA(n int) {
	if e.pending {
		e.sep('%')
	}
	switch {
	case n < 10:
		e.out = append(e.out, '%', byte('0'+n))
	case n < 100:
		e.out = append(e.out, '%', byte('0'+n/10), byte('0'+n%10))
	case n < 1000:
		e.out = append(e.out, '%', byte('0'+n/100), byte('0'+n/10%10), byte('0'+n%10))
	case n < 10000:
		e.out = append(e.out, '%', byte('0'+n/1000), byte('0'+n/100%10), byte('0'+n/10%10), byte('0'+n%10))
	default:
		e.emitSSALong(n)
	}
}

func (e *emitter) emitSSALong(n int) {
	var d [24]byte
	k := len(d)
	for {
		k--
		d[k] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	k--
	d[k] = '%'
	e.out = appendRun(e.out, d[k:])
}

// trimSpace drops trailing whitespace from the output.
func (e *emitter) trimSpace() {
	for len(e.out) > e.base && isSpace(e.out[len(e.out)-1]) {
		e.out = e.out[:len(e.out)-1]
	}
}

// lastNonSpace returns the last non-space byte the output would hold after
// flushing up to i, or 0.
func (e *emitter) lastNonSpace(i int) byte {
	for p := i - 1; p >= e.start; p-- {
		if !isSpace(e.src[p]) {
			return e.src[p]
		}
	}
	for p := len(e.out) - 1; p >= e.base; p-- {
		if !isSpace(e.out[p]) {
			return e.out[p]
		}
	}
	return 0
}

// drop removes src[p:end] together with the whitespace around it, leaving a
// pending separator; if withComma, a preceding ',' (list separator of the
// removed item) is dropped too.
func (e *emitter) drop(p, end int, withComma bool) {
	e.flush(p)
	e.trimSpace()
	if withComma && len(e.out) > e.base && e.out[len(e.out)-1] == ',' {
		e.out = e.out[:len(e.out)-1]
		e.trimSpace()
	}
	e.pending = true
	e.start = skipHSpace(e.src, end)
}

// skipHSpace returns the index of the first byte at or after i that is not a
// space, tab or carriage return.
func skipHSpace(s []byte, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r') {
		i++
	}
	return i
}

// newline handles a line break at src[i]: trailing whitespace before it and
// the whole whitespace run become one pending separator. It returns the index
// after the run.
func (e *emitter) newline(i int) int {
	e.flush(i)
	e.trimSpace()
	e.pending = true
	i = skipSpace(e.src, i)
	e.start = i
	return i
}
