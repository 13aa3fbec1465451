package keying

import (
	"bytes"
	"unicode/utf8"
)

// scanBackend finds the string value of the top-level "backend" field of a
// JSON object without decoding the rest: string values are skipped with
// bytes.IndexByte, so a 10 MiB module costs one fast pass instead of
// encoding/json's validate-then-decode. ok is false when the input is not a
// plain object it understands (an escape in a key or in the backend value,
// malformed structure, no backend, a backend that is not valid UTF-8): the caller then falls back to
// encoding/json, which gives the precise error. The last "backend" wins, as
// in encoding/json.
func scanBackend(b []byte) (backend string, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return "", false
	}
	i = skipSpace(b, i+1)
	found := false
	if i < len(b) && b[i] == '}' {
		return "", false
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return "", false
		}
		end, esc := stringEnd(b, i)
		if end < 0 || esc {
			return "", false
		}
		key := b[i+1 : end]
		i = skipSpace(b, end+1)
		if i >= len(b) || b[i] != ':' {
			return "", false
		}
		i = skipSpace(b, i+1)
		if string(key) == "backend" {
			if i >= len(b) || b[i] != '"' {
				return "", false
			}
			vend, vesc := stringEnd(b, i)
			// encoding/json turns invalid UTF-8 into U+FFFD: leave such
			// a value to it, so that both paths name one backend.
			if vend < 0 || vesc || !utf8.Valid(b[i+1:vend]) {
				return "", false
			}
			backend, found = string(b[i+1:vend]), true
			i = vend + 1
		} else if i = skipValue(b, i); i < 0 {
			return "", false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return "", false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			if skipSpace(b, i+1) != len(b) || !found {
				return "", false
			}
			return backend, true
		default:
			return "", false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index of the quote closing the string that opens at
// b[i], and whether the string holds a backslash escape; -1 if unterminated.
// Control characters are not checked (the fallback and the plugin do).
func stringEnd(b []byte, i int) (int, bool) {
	esc := false
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1, esc
		}
		q := j + k
		// Count the backslashes before the quote: an odd run escapes it.
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if !esc && bytes.IndexByte(b[j:q], '\\') >= 0 {
			esc = true
		}
		if n%2 == 0 {
			return q, esc
		}
		j = q + 1
	}
}

// skipValue returns the index just past the JSON value at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := stringEnd(b, i)
		if end < 0 {
			return -1
		}
		return end + 1
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, _ := stringEnd(b, i)
				if end < 0 {
					return -1
				}
				i = end + 1
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}
