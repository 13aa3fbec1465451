package xlacanon

import (
	"bytes"
	"fmt"
)

// ssaNames renames MLIR SSA values (%0, %c, %cst_3, %arg0 …) to %0, %1, … in
// order of first appearance. The mapping is injective on names, so the
// renamed text parses to the same IR: printer-chosen names carry no meaning.
type ssaNames struct {
	num   []int32 // numeric names without leading zeros: index+1, 0 = unseen
	named map[string]int32
	n     int32
}

func (s *ssaNames) reset() {
	clear(s.num)
	s.num = s.num[:0]
	if s.named == nil {
		s.named = make(map[string]int32)
	}
	clear(s.named)
	s.n = 0
}

// lookup returns the new number of the SSA name id (without '%').
func (s *ssaNames) lookup(id []byte) int32 {
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
	if k, ok := s.named[string(id)]; ok {
		return k
	}
	k := s.n
	s.n++
	s.named[string(id)] = k
	return k
}

// canonMLIR appends the canonical form of the StableHLO/MLIR text src to dst
// and returns it with the module's symbol name (the display name).
func (c *Canonicalizer) canonMLIR(dst, src []byte) ([]byte, string, error) {
	e := emitter{src: src, out: dst}
	base := len(dst)
	c.ssa.reset()
	var name string
	pats := [...]lazyPattern{{pat: "module"}, {pat: "jax."}, {pat: "mhlo.layout_mode"}}
	const (
		pModule = iota
		pJax
		pLayout
	)
	n := len(src)
	lim := 0
	refresh := func(i int) {
		lim = n
		for k := range pats {
			pats[k].refresh(src, i)
			if pats[k].next < lim {
				lim = pats[k].next
			}
		}
	}
	refresh(0)
	i := 0
	for i < n {
		// The hot loop: plain bytes, and single spaces that are already
		// canonical, stay in the verbatim run.
		for i < lim {
			c := src[i]
			if mlirClass[c] == cPlain {
				i++
				continue
			}
			if c == ' ' && i > e.start && i+1 < n && spaceBeforeOK[src[i+1]] && spaceAfterOK[src[i-1]] {
				i++
				continue
			}
			break
		}
		if i >= n {
			break
		}
		if i == lim {
			switch {
			case pats[pModule].next == i:
				if !tokenStart(src, i) || !tokenEnd(src, i+6) {
					i++
					break
				}
				pats[pModule].off = true
				e.flush(i)
				if hasByte(e.out[base:], '{') {
					i += 6
					break
				}
				j := skipSpace(src, i+6)
				if j < n && src[j] == '@' {
					end, sym := symbolAt(src, j+1)
					if end < 0 {
						return nil, "", fmt.Errorf("%w: malformed module name at byte %d", ErrModule, j)
					}
					name = sym
					e.flush(i + 6)
					e.pending = true
					e.start = end
					i = end
					break
				}
				i += 6
			case pats[pJax].next == i:
				k := i + len("jax.")
				var attr int
				switch {
				case hasPrefixAt(src, k, "result_info"):
					attr = k + len("result_info")
				case hasPrefixAt(src, k, "arg_info"):
					attr = k + len("arg_info")
				}
				if attr == 0 || !tokenStart(src, i) || !tokenEnd(src, attr) {
					i++
					break
				}
				i = e.dropAttr(i, attr, "")
			case pats[pLayout].next == i:
				attr := i + len("mhlo.layout_mode")
				if !tokenStart(src, i) || !tokenEnd(src, attr) {
					i++
					break
				}
				i = e.dropAttr(i, attr, `"default"`)
			default:
				i++
			}
			refresh(i)
			continue
		}
		switch mlirClass[src[i]] {
		case cParen:
			p := i - 3
			if p < e.start || string(src[p:i]) != "loc" || !tokenStart(src, p) {
				i++
				break
			}
			end := skipBalanced(src, i, '(', ')')
			if end < 0 {
				return nil, "", fmt.Errorf("%w: unbalanced loc( at byte %d", ErrModule, p)
			}
			e.drop(p, end, false)
			i = end
		case cSpace:
			e.flush(i)
			e.pending = true
			i = skipSpace(src, i)
			e.start = i
		case cQuote:
			end := skipString(src, i)
			if end < 0 {
				return nil, "", fmt.Errorf("%w: unterminated string at byte %d", ErrModule, i)
			}
			i = end
		case cSlash:
			if i+1 < n && src[i+1] == '/' {
				end := lineEnd(src, i)
				e.drop(i, end, false)
				i = end
			} else {
				i++
			}
		case cPercent:
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
			if j == i+1 || !tokenStart(src, i) {
				i++
				continue
			}
			k := c.ssa.lookup(src[i+1 : j])
			e.flush(i)
			e.emitSSA(int(k))
			e.start = j
			i = j
		case cHash:
			end := locAliasEnd(src, i)
			if end == -2 {
				return nil, "", fmt.Errorf("%w: unbalanced loc( in alias at byte %d", ErrModule, i)
			}
			if end < 0 {
				i++
				continue
			}
			e.drop(i, end, false)
			i = end
		}
		if i > lim {
			refresh(i)
		}
	}
	e.flush(n)
	e.trimSpace()
	return e.out, name, nil
}

// dropAttr removes the attribute-dictionary entry `name = value` whose name
// spans src[p:attr], if it is an entry of a dictionary (preceded by '{' or
// ',') with a string value (equal to want unless want is empty). It returns
// where scanning continues.
func (e *emitter) dropAttr(p, attr int, want string) int {
	src := e.src
	prev := e.lastNonSpace(p)
	if prev != '{' && prev != ',' {
		return p + 1
	}
	j := skipSpace(src, attr)
	if j >= len(src) || src[j] != '=' {
		return p + 1
	}
	j = skipSpace(src, j+1)
	if j >= len(src) || src[j] != '"' {
		return p + 1
	}
	q := skipString(src, j)
	if q < 0 || (want != "" && string(src[j:q]) != want) {
		return p + 1
	}
	r := skipSpace(src, q)
	switch {
	case r < len(src) && src[r] == ',':
		e.drop(p, r+1, false)
		return r + 1
	case r < len(src) && src[r] == '}':
		if prev == ',' {
			e.drop(p, r, true)
			return r
		}
		// The dictionary becomes empty: drop its braces too.
		e.flush(p)
		e.trimSpace()
		if len(e.out) > 0 && e.out[len(e.out)-1] == '{' {
			e.out = e.out[:len(e.out)-1]
			e.trimSpace()
		}
		e.pending = true
		e.start = r + 1
		return r + 1
	}
	return p + 1
}

// locAliasEnd returns the end of a location alias definition
// `#name = loc(...)` starting at src[i] == '#', -1 if there is none there,
// or -2 if its loc( is not closed.
func locAliasEnd(src []byte, i int) int {
	if !tokenStart(src, i) {
		return -1
	}
	j := i + 1
	for j < len(src) && identChar[src[j]] {
		j++
	}
	if j == i+1 {
		return -1
	}
	j = skipSpace(src, j)
	if j >= len(src) || src[j] != '=' {
		return -1
	}
	j = skipSpace(src, j+1)
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
	if k := bytes.IndexByte(src[i:], '\n'); k >= 0 {
		return i + k
	}
	return len(src)
}

func hasByte(b []byte, c byte) bool { return bytes.IndexByte(b, c) >= 0 }
