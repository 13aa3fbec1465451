//go:build wasm

package xlacanon

import "unsafe"

// decodeRun is str's hot loop, for wasm: it decodes b[i:] into buf[o:] a
// word at a time and returns the new i and o, with hi ORed with every word
// copied. It stops before the closing quote, a \u or invalid escape, or when
// fewer than 10 input or 16 output bytes remain; str handles those.
//
// It is the native loop (jsonrun_other.go) with unchecked loads and
// stores, taking two words before its back edge. Go's wasm backend compiles
// every taken branch to an indirect jump through its dispatch loop, so this
// loop was once branch-free, four words and one escape per iteration; since
// the host sends jumps forward straight to their block
// (plugins/internal/wasmstop), only the back edge still goes that way (and
// through the host's stop check), and branching on the escapes costs less
// than the straight-line code did: on the generated 10 MiB module, the
// decode took 171 M instructions under wazero that way, 135 M this way.
//
// One limit computed up front proves every access in bounds: o-i never
// grows (a word moves both by 8, an escape i by 2 and o by 1), so i <= lim
// keeps o+16 <= len(buf) as well as i+10 <= len(b).
func decodeRun(b []byte, i int, buf []byte, o int, hi uint64) (int, int, uint64) {
	lim := min(len(b)-10, len(buf)-16-(o-i))
	src := unsafe.Pointer(unsafe.SliceData(b))
	dst := unsafe.Pointer(unsafe.SliceData(buf))
	for i <= lim {
		x := *(*uint64)(unsafe.Add(src, i))
		*(*uint64)(unsafe.Add(dst, o)) = x
		hi |= x
		m := (hasByte8Raw(x, '"') | hasByte8Raw(x, '\\')) & hi8
		if m == 0 {
			// A second word before the back edge (which goes through
			// Go's dispatch loop and the host's stop check).
			i += 8
			o += 8
			if i > lim {
				break
			}
			x = *(*uint64)(unsafe.Add(src, i))
			*(*uint64)(unsafe.Add(dst, o)) = x
			hi |= x
			m = (hasByte8Raw(x, '"') | hasByte8Raw(x, '\\')) & hi8
			if m == 0 {
				i += 8
				o += 8
				continue
			}
		}
		k := firstFlag(m)
		i += k
		o += k
		if *(*byte)(unsafe.Add(src, i)) == '"' {
			break
		}
		d := escByte[*(*byte)(unsafe.Add(src, i+1))] // i+1 < i-k+8 < len(b)
		if d == 0 {
			break
		}
		*(*byte)(unsafe.Add(dst, o)) = d
		i += 2
		o++
	}
	return i, o, hi
}
