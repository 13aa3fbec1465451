//go:build wasm

package xlacanon

import "unsafe"

// load64 reads eight bytes of b at i (i+8 <= len(b)) as a little-endian word.
func load64(b []byte, i int) uint64 {
	_ = b[i+7]
	return *(*uint64)(unsafe.Pointer(unsafe.SliceData(b[i:])))
}

// loadInside is load64 without the bounds check, for loops whose condition
// already keeps 0 <= i and i+8 <= len(b) (the caller's invariant): under
// wasm the checks are compares and branches in the loop body.
func loadInside(b []byte, i int) uint64 {
	return *(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), i))
}

// byteInside is b[i] without the bounds check, for call sites where a guard
// just before already keeps 0 <= i < len(b) (each says which): under wasm the
// check is a compare and a branch at every stop of the scan.
func byteInside(b []byte, i int) byte {
	return *(*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), i))
}

// store64Inside writes v little-endian at b[o:o+8] without bounds checks,
// for call sites that test o+8 <= cap(b) just before (each says where).
func store64Inside(b []byte, o int, v uint64) {
	*(*uint64)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), o)) = v
}

// slotAt is &slots[k] without the bounds check, for k = h & (len(slots)-1):
// that is below len(slots) whenever len(slots) >= 1, and reset makes the
// table 256 slots long before any lookup (grow only doubles it).
func slotAt(slots []ssaSlot, k int) *ssaSlot {
	return (*ssaSlot)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(slots)), uintptr(k)*unsafe.Sizeof(ssaSlot{})))
}

// indexByte returns the index of the first c in b at or after i, or -1.
// Under wasm the standard library's IndexByte is a byte loop; SWAR is faster.
func indexByte(b []byte, i int, c byte) int { return indexByteSWAR(b, i, c) }

// move32At copies src[s:s+32] to dst[o:o+32] in four word moves, without
// bounds checks: the caller keeps o+32 <= cap(dst) and s+32 <= cap(src).
func move32At(dst []byte, o int, src []byte, s int) {
	d := unsafe.Add(unsafe.Pointer(unsafe.SliceData(dst)), o)
	p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(src)), s)
	*(*uint64)(d) = *(*uint64)(p)
	*(*uint64)(unsafe.Add(d, 8)) = *(*uint64)(unsafe.Add(p, 8))
	*(*uint64)(unsafe.Add(d, 16)) = *(*uint64)(unsafe.Add(p, 16))
	*(*uint64)(unsafe.Add(d, 24)) = *(*uint64)(unsafe.Add(p, 24))
}

// appendRun appends src to dst. Under wasm, a memmove call costs far more
// than the few bytes a typical run holds, so runs of up to 48 bytes go a
// word at a time (see also emitter.copyRun).
func appendRun(dst, src []byte) []byte {
	n := len(src)
	if n >= 48 {
		return append(dst, src...)
	}
	o := len(dst)
	if cap(dst)-o < n+8 {
		return append(dst, src...)
	}
	d := unsafe.Pointer(unsafe.SliceData(dst[:cap(dst)]))
	s := unsafe.Pointer(unsafe.SliceData(src))
	i := 0
	if cap(src) >= n+8 {
		// Whole words, the last one overshooting into bytes of dst beyond
		// the new length (overwritten later) read from src's own array:
		// no byte loop (every loop iteration is costly under wasm).
		for ; i < n; i += 8 {
			*(*uint64)(unsafe.Add(d, o+i)) = *(*uint64)(unsafe.Add(s, i))
		}
		return dst[:o+n]
	}
	for ; i+8 <= n; i += 8 {
		*(*uint64)(unsafe.Add(d, o+i)) = *(*uint64)(unsafe.Add(s, i))
	}
	for ; i < n; i++ {
		*(*byte)(unsafe.Add(d, o+i)) = *(*byte)(unsafe.Add(s, i))
	}
	return dst[:o+n]
}
