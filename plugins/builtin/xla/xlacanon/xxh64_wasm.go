//go:build wasm

package xlacanon

import "unsafe"

// xxStripes runs the XXH64 accumulators v1..v4 over every whole 32-byte
// stripe of b and returns the offset after the last one with the new
// accumulators.
//
// Under wasm, load64's bounds and nil checks and the loop's back edge (an
// indirect jump through the function's dispatch table) cost more than the
// rounds themselves, so the loop reads through an unsafe pointer, bounded
// once by the stripe count, and takes two stripes per iteration.
func xxStripes(b []byte, v1, v2, v3, v4 uint64) (int, uint64, uint64, uint64, uint64) {
	n := len(b) &^ 31
	if n == 0 {
		return 0, v1, v2, v3, v4
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	i := 0
	for ; i+64 <= n; i += 64 {
		q := unsafe.Add(p, i)
		v1 = xxRound(v1, *(*uint64)(q))
		v2 = xxRound(v2, *(*uint64)(unsafe.Add(q, 8)))
		v3 = xxRound(v3, *(*uint64)(unsafe.Add(q, 16)))
		v4 = xxRound(v4, *(*uint64)(unsafe.Add(q, 24)))
		v1 = xxRound(v1, *(*uint64)(unsafe.Add(q, 32)))
		v2 = xxRound(v2, *(*uint64)(unsafe.Add(q, 40)))
		v3 = xxRound(v3, *(*uint64)(unsafe.Add(q, 48)))
		v4 = xxRound(v4, *(*uint64)(unsafe.Add(q, 56)))
	}
	if i < n {
		q := unsafe.Add(p, i)
		v1 = xxRound(v1, *(*uint64)(q))
		v2 = xxRound(v2, *(*uint64)(unsafe.Add(q, 8)))
		v3 = xxRound(v3, *(*uint64)(unsafe.Add(q, 16)))
		v4 = xxRound(v4, *(*uint64)(unsafe.Add(q, 24)))
		i += 32
	}
	return i, v1, v2, v3, v4
}
