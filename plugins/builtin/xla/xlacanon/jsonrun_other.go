//go:build !wasm

package xlacanon

// decodeRun is str's hot loop: it decodes b[i:] into buf[o:] a word at a
// time and returns the new i and o, with hi ORed with every word copied. It
// stops before the closing quote, a \u or invalid escape, or when fewer than
// 10 input or 16 output bytes remain; str handles those.
//
// Natively, branches on the escapes are predicted and run ahead of the data,
// so this loop branches; the branch-free version in jsonrun_wasm.go makes
// every iteration wait for the previous one's loads and runs at half this
// speed here.
func decodeRun(b []byte, i int, buf []byte, o int, hi uint64) (int, int, uint64) {
	// o-i never grows (a word moves both by k, an escape i by 2 and o by
	// 1), so i <= lim keeps o+16 <= len(buf) as well as i+10 <= len(b).
	lim := min(len(b)-10, len(buf)-16-(o-i))
	for i <= lim {
		x := load64(b, i)
		store64(buf, o, x)
		hi |= x
		m := hasByte8(x, '"') | hasByte8(x, '\\')
		if m == 0 {
			i += 8
			o += 8
			continue
		}
		k := firstFlag(m)
		i += k
		o += k
		if b[i] == '"' {
			break
		}
		d := escByte[b[i+1]]
		if d == 0 {
			break
		}
		buf[o] = d
		i += 2
		o++
	}
	return i, o, hi
}
