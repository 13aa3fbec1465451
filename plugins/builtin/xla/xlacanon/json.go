package xlacanon

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// jreader is a minimal JSON reader for the signature's top-level object. It
// decodes strings in bulk (bytes.IndexByte to the next quote or backslash),
// because the module string dominates the input and encoding/json's
// byte-at-a-time scanner is ten times slower under wasm.
type jreader struct {
	b    []byte
	i    int
	high bool // the last str may hold a byte >= 0x80 (see str)
}

func (r *jreader) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s (at byte %d)", ErrSignature, fmt.Sprintf(format, args...), r.i)
}

func (r *jreader) ws() {
	for r.i < len(r.b) && isSpace(r.b[r.i]) {
		r.i++
	}
}

func (r *jreader) peek() byte {
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

// null consumes a JSON null if one is next.
func (r *jreader) null() bool {
	if hasPrefixAt(r.b, r.i, "null") {
		r.i += 4
		return true
	}
	return false
}

// escByte maps the letter after a backslash to the byte a one-byte escape
// stands for; 0 marks \u and invalid escapes, which take the slow path.
var escByte = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// str decodes the JSON string at the reader into dst (appended) and records
// in r.high whether it may hold a byte >= 0x80, so that callers run
// utf8.Valid only when one can be invalid. Plain bytes and one-byte escapes
// go through decodeRun, a word at a time with no calls; the closing quote,
// \u escapes, errors, the last few bytes and growing the buffer are handled
// here.
func (r *jreader) str(dst []byte) ([]byte, error) {
	r.high = false
	if r.peek() != '"' {
		return dst, r.errorf("expected a JSON string")
	}
	b := r.b
	i := r.i + 1
	o := len(dst)
	buf := dst[:cap(dst)]
	var hi uint64 // OR of every word copied: bit 7 of a byte marks a possible byte >= 0x80
	for {
		if o+16 > len(buf) {
			// Grow geometrically, never past what the rest of the input
			// could decode to (a decoded string is never longer than its
			// encoding).
			need := max(2*len(buf), o+64)
			need = min(need, o+len(b)-i+16)
			grown := make([]byte, need)
			copy(grown, buf[:o])
			buf = grown
			dst = buf[:o]
		}
		i, o, hi = decodeRun(b, i, buf, o, hi)
		if i >= len(b) {
			return dst, r.errorf("unterminated JSON string")
		}
		if o+16 > len(buf) {
			continue
		}
		c := b[i]
		if c != '"' && c != '\\' {
			buf[o] = c
			hi |= uint64(c)
			i++
			o++
			continue
		}
		if c == '"' {
			r.i = i + 1
			r.high = hi&hi8 != 0
			return buf[:o], nil
		}
		// An escape at b[i].
		if i+1 >= len(b) {
			return dst, r.errorf("unterminated JSON string")
		}
		e := b[i+1]
		if e != 'u' {
			c := escByte[e]
			if c == 0 {
				r.i = i
				return dst, r.errorf("bad escape \\%c in JSON string", e)
			}
			buf[o] = c
			o++
			i += 2
			continue
		}
		v, ok := hex4(b, i+2)
		if !ok {
			r.i = i
			return dst, r.errorf("bad \\u escape in JSON string")
		}
		i += 6
		rr := rune(v)
		if utf16.IsSurrogate(rr) {
			w, ok := -1, false
			if hasPrefixAt(b, i, `\u`) {
				w, ok = hex4(b, i+2)
			}
			rr = utf16.DecodeRune(rr, rune(w))
			if !ok || rr == utf8.RuneError {
				r.i = i
				return dst, r.errorf("unpaired surrogate in JSON string")
			}
			i += 6
		}
		if rr >= utf8.RuneSelf {
			hi |= hi8
		}
		o += utf8.EncodeRune(buf[o:], rr)
	}
}

func hex4(b []byte, i int) (int, bool) {
	if len(b)-i < 4 {
		return 0, false
	}
	v := 0
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// raw returns the bytes of the JSON value at the reader without validating
// its contents (callers validate with json.Compact).
func (r *jreader) raw() ([]byte, error) {
	start := r.i
	switch r.peek() {
	case '{', '[':
		depth := 0
		for r.i < len(r.b) {
			switch r.b[r.i] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					r.i++
					return r.b[start:r.i], nil
				}
			case '"':
				end := skipString(r.b, r.i)
				if end < 0 {
					return nil, r.errorf("unterminated JSON string")
				}
				r.i = end - 1
			}
			r.i++
		}
		return nil, r.errorf("unterminated JSON value")
	case '"':
		end := skipString(r.b, r.i)
		if end < 0 {
			return nil, r.errorf("unterminated JSON string")
		}
		r.i = end
		return r.b[start:end], nil
	case 0:
		return nil, r.errorf("expected a JSON value")
	}
	for r.i < len(r.b) && !isSpace(r.b[r.i]) && r.b[r.i] != ',' && r.b[r.i] != '}' && r.b[r.i] != ']' {
		r.i++
	}
	return r.b[start:r.i], nil
}

// appendJSONString appends s as a JSON string literal. s must be valid UTF-8;
// only '"', '\\' and control bytes are escaped, so the encoding is canonical.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"
