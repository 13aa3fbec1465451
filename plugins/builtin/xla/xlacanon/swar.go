package xlacanon

import "math/bits"

// SWAR (SIMD within a register) helpers: the scanners test eight bytes at a
// time for the few bytes that may start something to rewrite. Under wasm,
// where bytes.IndexByte is a byte loop and every call is expensive, this is
// what keeps the plugin's throughput up.

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// hasByte8 flags (in bit 7 of each byte) the bytes of x equal to c. The
// lowest flagged byte is always a true match (false positives only appear
// above a true match), so TrailingZeros64(m)/8 is the first match.
func hasByte8(x uint64, c byte) uint64 {
	y := x ^ (uint64(c) * lo8)
	return (y - lo8) &^ y & hi8
}

// firstFlag returns the byte index of the lowest flag in m (m != 0).
func firstFlag(m uint64) int { return bits.TrailingZeros64(m) >> 3 }

// indexByteSWAR returns the index of the first c in b at or after i, or -1.
func indexByteSWAR(b []byte, i int, c byte) int {
	for i+8 <= len(b) {
		if m := hasByte8(load64(b, i), c); m != 0 {
			return i + firstFlag(m)
		}
		i += 8
	}
	for ; i < len(b); i++ {
		if b[i] == c {
			return i
		}
	}
	return -1
}
