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
	// "HloModule" is searched for lazily (once found, it is turned off).
	// The debug attributes the scan drops, "metadata=" and
	// "stack_frame_id=", are found by the word loop instead, through their
	// last two bytes: '=' behind 'a' or 'd' (in the corpus, "a=" occurs
	// only in "metadata=", and "d=" about five times as often as
	// "stack_frame_id="). Searching for them separately by a single byte
	// ('d', 'k') stopped at most words of a module.
	header := lazyPattern{pat: "HloModule"}
	n := len(src)
	// Leading whitespace goes (trailing whitespace is trimmed at the end).
	i := skipSpace(src, 0)
	e.start = i
	header.refresh(src, i)
	lim := header.next
	// from is where the scan last resumed after a handler: a pattern is
	// recognized only if all of it lies in bytes the scan passed over as
	// plain text (see canonMLIRPass).
	from := i
	for i < n {
		for i+8 <= lim && i > 0 {
			x := loadInside(src, i) // 0 < i and i+8 <= lim <= n
			if m := (hasByte8Raw(x, '\n') | hasByte8Raw(x, '"') | hasByte8Raw(x, '/') |
				hasByte8Raw(x, '=')&(hasByte8Raw(loadInside(src, i-1), 'a')|hasByte8Raw(loadInside(src, i-1), 'd'))) & hi8; m != 0 {
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
			// The first HloModule token is the header, whatever
			// follows it: the output may lose the whitespace after
			// it (`HloModule\n)` becomes `HloModule)`), and a second
			// pass must pick the same one. No dropped attribute can
			// be pending here: "HloModule" cannot start inside one.
			j := i + len("HloModule")
			switch {
			case !e.tokenStartAt(i) || !tokenEnd(src, j):
				i++
			default:
				header.off = true
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
			}
			header.refresh(src, i)
			lim = header.next
			from = i
			continue
		}
		switch hloClass[src[i]] {
		case cEquals:
			// "metadata=" or "stack_frame_id=" ends here if the bytes
			// before it spell it and were scanned as plain text.
			switch p := i + 1 - len("metadata="); {
			case p >= from && src[i-1] == 'a' && hasPrefixAt(src, p, "metadata="):
				body := i + 1
				if !e.tokenStartAt(p) || body >= n || src[body] != '{' {
					i++ // no other pattern or stop starts inside "metadata"
					break
				}
				end := skipBalanced(src, body, '{', '}')
				if end < 0 {
					return nil, "", fmt.Errorf("%w: unbalanced metadata={ at byte %d", ErrModule, p)
				}
				e.drop(p, end, true)
				i = e.start
			default:
				p = i + 1 - len("stack_frame_id=")
				if p < from || src[i-1] != 'd' || !hasPrefixAt(src, p, "stack_frame_id=") {
					i++
					continue
				}
				j := i + 1
				k := j
				for k < n && isDigit(src[k]) {
					k++
				}
				if !e.tokenStartAt(p) || k == j || !tokenEnd(src, k) {
					i++ // nor inside "stack_frame_id"
					break
				}
				e.drop(p, k, true)
				i = e.start
			}
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
				if m := hasByte8(loadInside(src, i+1), '"') | hasByte8(loadInside(src, i+1), '\\'); m != 0 {
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
			header.refresh(src, i)
			lim = header.next
		}
		from = i
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
