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

// hasByte8Raw is hasByte8 before its final "& hi8": bit 7 of each byte is
// hasByte8's flag, the other bits are garbage. ANDing with hi8 distributes
// over | and &, so a classifier that combines several tests masks once, at
// the end, with exactly hasByte8's result (one operation and one 64-bit
// constant less per test: the MLIR word loop makes eleven).
func hasByte8Raw(x uint64, c byte) uint64 {
	y := x ^ (uint64(c) * lo8)
	return (y - lo8) &^ y
}

// firstFlag returns the byte index of the lowest flag in m (m != 0).
func firstFlag(m uint64) int { return bits.TrailingZeros64(m) >> 3 }

// indexByteSWAR returns the index of the first c in b at or after i, or -1.
func indexByteSWAR(b []byte, i int, c byte) int {
	for i+8 <= len(b) {
		if m := hasByte8(loadInside(b, i), c); m != 0 {
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

// The helpers below classify every byte of a word exactly (hasByte8 may
// flag bytes above a true match, which is fine for finding the first match
// but not for measuring a run): they never let a carry or borrow cross a
// byte, so each byte's flag depends on that byte alone.

const lo7 = 0x7f7f7f7f7f7f7f7f

// nonzero8 sets bit 7 of each nonzero byte of x (the other bits are
// garbage): adding 0x7f to a byte's low seven bits sets its bit 7 unless they
// are all zero, and x's own bit 7 covers bytes >= 0x80; the sum of at most
// 0xfe never carries into the next byte.
func nonzero8(x uint64) uint64 { return (x & lo7) + lo7 | x }

// zero8 flags (in bit 7) exactly the zero bytes of x.
func zero8(x uint64) uint64 { return ^nonzero8(x) & hi8 }

// eq8 flags exactly the bytes of x equal to c.
func eq8(x uint64, c byte) uint64 { return zero8(x ^ uint64(c)*lo8) }

// in8 flags exactly the bytes b of x with lo <= b <= hi (0 < lo <= hi <
// 0x80). On a byte's low seven bits v, v + (0x80-lo) has bit 7 set iff
// v >= lo and v + (0x7f-hi) iff v > hi; neither sum exceeds 0xff. Bytes
// >= 0x80 are then cleared.
func in8(x uint64, lo, hi byte) uint64 {
	v := x & lo7
	return (v + uint64(0x80-lo)*lo8) &^ (v + uint64(0x7f-hi)*lo8) &^ x & hi8
}

// leading returns how many bytes of x, from the lowest (the first in
// memory), are flagged in m (an exact flag mask): 0 to 8.
func leading(m uint64) int { return bits.TrailingZeros64(^m&hi8) >> 3 }

// spaceMask flags the bytes of x that isSpace accepts: the bytes for which
// x xor c is zero for one of the four c, i.e. not nonzero for all four
// (written out so that it stays cheap enough to inline).
func spaceMask(x uint64) uint64 {
	return ^(nonzero8(x^(' '*lo8)) & nonzero8(x^('\n'*lo8)) & nonzero8(x^('\t'*lo8)) & nonzero8(x^('\r'*lo8))) & hi8
}

// identMask flags the bytes of x that identChar accepts: [A-Za-z0-9_$.-].
// It is in8 for three ranges and eq8 for two bytes, sharing the low seven
// bits v and the final clearing of bytes >= 0x80 (written out so that it
// stays cheap enough to inline). Or-ing 0x20 maps exactly the upper-case
// letters onto the lower-case ones (and no other byte into 'a'..'z'); '-'
// and '.' are adjacent. As v's bytes are below 0x80, so are those of w =
// v xor c, and w + 0x7f has bit 7 clear iff w is zero (nonzero8 simplified).
func identMask(x uint64) uint64 {
	v := x & lo7
	l := v | 0x2020202020202020
	letter := (l + (0x80-'a')*lo8) &^ (l + (0x7f-'z')*lo8)
	digit := (v + (0x80-'0')*lo8) &^ (v + (0x7f-'9')*lo8)
	dashDot := (v + (0x80-'-')*lo8) &^ (v + (0x7f-'.')*lo8)
	underOrDollar := ^(((v ^ '_'*lo8) + lo7) & ((v ^ '$'*lo8) + lo7))
	return (letter | digit | dashDot | underOrDollar) &^ x & hi8
}

// digitMask flags the ASCII digits of x.
func digitMask(x uint64) uint64 { return in8(x, '0', '9') }
