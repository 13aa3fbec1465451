//go:build wasm

package xlacanon

import "unsafe"

// decodeRun is str's hot loop, for wasm: it decodes b[i:] into buf[o:] a word
// at a time and returns the new i and o, with hi ORed with every word copied.
// It stops before the closing quote, a \u or invalid escape, or when fewer
// than 10 input or 16 output bytes remain; str handles those.
//
// Go's wasm backend turns every taken branch into an indirect jump through
// one dispatch table per function, and module text has an escape (\" or \n)
// every twenty to thirty bytes, so a branch per escape costs more than the
// copying. Each iteration is therefore the same straight-line code: copy
// eight bytes, advance to the first quote or backslash in them (or by
// eight), then write the escape's byte and step over it with arithmetic
// (esc is 0 or 1). The one taken branch is the back edge.
//
// Bounds and nil checks are compares and branches in that body too, and one
// limit computed up front proves every access in bounds: o-i never grows (a
// word moves both by k, an escape i by 2 and o by 1), so i <= lim keeps
// o+16 <= len(buf) as well as i+10 <= len(b). Hence the unsafe loads and
// stores.
func decodeRun(b []byte, i int, buf []byte, o int, hi uint64) (int, int, uint64) {
	lim := min(len(b)-10, len(buf)-16-(o-i))
	if i > lim {
		return i, o, hi
	}
	src := unsafe.Pointer(unsafe.SliceData(b))
	dst := unsafe.Pointer(unsafe.SliceData(buf))
	for i <= lim {
		x := *(*uint64)(unsafe.Add(src, i))
		*(*uint64)(unsafe.Add(dst, o)) = x
		hi |= x
		k := firstFlag(hasByte8(x, '"') | hasByte8(x, '\\')) // 8 when neither
		i += k
		o += k
		c := *(*byte)(unsafe.Add(src, i))
		d := escByte[*(*byte)(unsafe.Add(src, i+1))]
		esc := 0
		if c == '\\' {
			esc = 1 // compiled to a conversion, not a branch
		}
		bad := 0
		if d == 0 {
			bad = 1
		}
		end := 0
		if c == '"' {
			end = 1
		}
		if end|esc&bad != 0 {
			break
		}
		// Without an escape at b[i], this byte is rewritten by the next
		// word.
		*(*byte)(unsafe.Add(dst, o)) = d
		i += 2 * esc
		o += esc
	}
	return i, o, hi
}
