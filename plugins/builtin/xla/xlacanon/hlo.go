package xlacanon

import (
	"bytes"
	"fmt"
)

// hloTables are the module-level debug tables of newer HLO text; each is a
// keyword line followed by numbered rows, and the whole block is removed.
var hloTables = [...]string{"FileNames", "FunctionNames", "FileLocations", "StackFrames"}

// canonHLO appends the canonical form of the HLO text src to dst and returns
// it with the HloModule name (the display name).
func canonHLO(dst, src []byte) ([]byte, string, error) {
	e := emitter{src: src, out: dst, base: len(dst)}
	base := e.base
	var name string
	pats := [...]lazyPattern{{pat: "metadata=", anchor: 4}, {pat: "stack_frame_id=", anchor: 4}, {pat: "HloModule", anchor: 0}}
	const (
		pMeta = iota
		pFrame
		pHeader
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
	// Leading whitespace goes (trailing whitespace is trimmed at the end).
	i := skipSpace(src, 0)
	e.start = i
	refresh(i)
	for i < n {
		for i+8 <= lim {
			x := load64(src, i)
			if m := hasByte8(x, '\n') | hasByte8(x, '"') | hasByte8(x, '/'); m != 0 {
				i += firstFlag(m)
				break
			}
			i += 8
		}
		for i < lim && hloClass[src[i]] == cPlain {
			i++
		}
		if i >= n {
			break
		}
		if i == lim {
			switch {
			case pats[pMeta].next == i:
				body := i + len("metadata=")
				if !e.tokenStartAt(i) || body >= n || src[body] != '{' {
					i++
					break
				}
				end := skipBalanced(src, body, '{', '}')
				if end < 0 {
					return nil, "", fmt.Errorf("%w: unbalanced metadata={ at byte %d", ErrModule, i)
				}
				e.drop(i, end, true)
				i = e.start
			case pats[pFrame].next == i:
				j := i + len("stack_frame_id=")
				k := j
				for k < n && isDigit(src[k]) {
					k++
				}
				if !e.tokenStartAt(i) || k == j || !tokenEnd(src, k) {
					i++
					break
				}
				e.drop(i, k, true)
				i = e.start
			case pats[pHeader].next == i:
				// The first HloModule token is the header, whatever
				// follows it: the output may lose the whitespace after
				// it (`HloModule\n)` becomes `HloModule)`), and a second
				// pass must pick the same one.
				j := i + len("HloModule")
				if !e.tokenStartAt(i) || !tokenEnd(src, j) {
					i++
					break
				}
				pats[pHeader].off = true
				e.flush(i)
				if hasByte(e.out[base:], '{') {
					i = j
					break
				}
				k := skipSpace(src, j)
				m := k
				for m < n && identChar[src[m]] {
					m++
				}
				if k == j || m == k {
					i = j
					break
				}
				name = string(src[k:m])
				if name == anonHLO {
					name = ""
				}
				e.flush(j)
				e.pending = true
				e.emit(anonHLO)
				e.start = m
				i = m
			default:
				i++
			}
			refresh(i)
			continue
		}
		switch hloClass[src[i]] {
		case cSpace:
			// A new line: the debug tables start only here.
			i = e.newline(i)
			if end := tablesEnd(src, i); end > i {
				// Like any removed construct, with the blanks after it.
				e.start = skipHSpace(src, end)
				i = e.start
			}
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
			switch {
			case i+1 < n && src[i+1] == '/':
				e.drop(i, lineEnd(src, i), false)
				i = e.start
			case i+1 < n && src[i+1] == '*':
				k := bytes.Index(src[i+2:], []byte("*/"))
				if k < 0 {
					return nil, "", fmt.Errorf("%w: unterminated /* comment at byte %d", ErrModule, i)
				}
				e.drop(i, i+2+k+2, false)
				i = e.start
			default:
				i++
			}
		default:
			i++
		}
		if i > lim {
			refresh(i)
		}
	}
	e.flush(n)
	e.trimSpace()
	// As for MLIR module names: a removed construct between `HloModule`
	// and a following name leaves them adjacent in the output, where a
	// second pass would see a header name; settle it here.
	out, late := renameHloHeader(e.out, base)
	if name == "" {
		name = late
	}
	return out, name, nil
}

// renameHloHeader replaces the name after the first `HloModule` token of
// canonical text out[base:] (before any '{', outside strings) by anonHLO,
// as a second canonicalization of the output would: that token is the
// header, and only a name after whitespace is its name.
func renameHloHeader(out []byte, base int) ([]byte, string) {
	for i := base; i < len(out); i++ {
		switch c := out[i]; {
		case c == '"':
			end := skipString(out, i)
			if end < 0 {
				return out, ""
			}
			i = end - 1
		case c == '{':
			return out, ""
		case c == 'H' && hasPrefixAt(out, i, "HloModule") && tokenStart(out, i) && tokenEnd(out, i+len("HloModule")):
			j := i + len("HloModule")
			k := skipSpace(out, j)
			m := k
			for m < len(out) && identChar[out[m]] {
				m++
			}
			if k == j || m == k || string(out[j:m]) == " "+anonHLO {
				return out, ""
			}
			name := string(out[k:m])
			if name == anonHLO {
				name = ""
			}
			return append(append(out[:j], " "+anonHLO...), out[m:]...), name
		}
	}
	return out, ""
}

// anonHLO replaces the HloModule name in canonical text (HLO requires one).
const anonHLO = "_"

// tablesEnd returns the end of a block of HLO debug tables starting at
// src[i] (FileNames, FunctionNames, FileLocations, StackFrames, each followed
// by rows "N \"string\"" or "N {...}"), or i if none starts there. Rows are
// parsed by their syntax, not by lines, so re-wrapped tables are removed too.
func tablesEnd(src []byte, i int) int {
	end := i
	inTable := false
	for {
		j := skipTrivia(src, end, true)
		if isTableKeyword(src, j) {
			k := j
			for k < len(src) && !isSpace(src[k]) {
				k++
			}
			end = k
			inTable = true
			continue
		}
		if !inTable || j >= len(src) || !isDigit(src[j]) {
			return end
		}
		k := j
		for k < len(src) && isDigit(src[k]) {
			k++
		}
		k = skipTrivia(src, k, true)
		switch {
		case k < len(src) && src[k] == '"':
			k = skipString(src, k)
		case k < len(src) && src[k] == '{':
			k = skipBalanced(src, k, '{', '}')
		default:
			return end
		}
		if k < 0 {
			return end
		}
		end = k
	}
}

func isTableKeyword(src []byte, j int) bool {
	for _, kw := range hloTables {
		if hasPrefixAt(src, j, kw) {
			k := j + len(kw)
			return k == len(src) || isSpace(src[k])
		}
	}
	return false
}
