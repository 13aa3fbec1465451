//go:build !wasm

package xlacanon

import (
	"bytes"
	"encoding/binary"
)

// load64 reads eight bytes of b at i (i+8 <= len(b)) as a little-endian word.
func load64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

// loadInside is load64 where the caller keeps 0 <= i and i+8 <= len(b)
// (unchecked under wasm; checked here).
func loadInside(b []byte, i int) uint64 { return load64(b, i) }

// byteInside is b[i] where the caller keeps 0 <= i < len(b) (unchecked under
// wasm; checked here).
func byteInside(b []byte, i int) byte { return b[i] }

// store64 writes v little-endian at b[o:o+8] (o+8 <= cap(b)).
func store64(b []byte, o int, v uint64) { binary.LittleEndian.PutUint64(b[o:o+8], v) }

// store64Inside is store64 where the caller keeps o+8 <= cap(b) (unchecked
// under wasm; checked here).
func store64Inside(b []byte, o int, v uint64) { store64(b[:o+8], o, v) }

// slotAt is &slots[k] for k = h & (len(slots)-1) (unchecked under wasm;
// checked here).
func slotAt(slots []ssaSlot, k int) *ssaSlot { return &slots[k] }

// indexByte returns the index of the first c in b at or after i, or -1.
func indexByte(b []byte, i int, c byte) int {
	if k := bytes.IndexByte(b[i:], c); k >= 0 {
		return i + k
	}
	return -1
}

// move32At copies src[s:s+32] to dst[o:o+32] (within their capacities).
func move32At(dst []byte, o int, src []byte, s int) { copy(dst[o:o+32], src[s:s+32]) }

// appendRun appends src to dst.
func appendRun(dst, src []byte) []byte { return append(dst, src...) }
