//go:build !wasm

package xlacanon

// xxStripes runs the XXH64 accumulators v1..v4 over every whole 32-byte
// stripe of b and returns the offset after the last one with the new
// accumulators. (xxh64_wasm.go has an unrolled version without bounds
// checks.)
func xxStripes(b []byte, v1, v2, v3, v4 uint64) (int, uint64, uint64, uint64, uint64) {
	i := 0
	for ; len(b)-i >= 32; i += 32 {
		s := b[i : i+32] // one bounds check per stripe
		v1 = xxRound(v1, load64(s, 0))
		v2 = xxRound(v2, load64(s, 8))
		v3 = xxRound(v3, load64(s, 16))
		v4 = xxRound(v4, load64(s, 24))
	}
	return i, v1, v2, v3, v4
}
