//go:build !wasm

package xlacanon

import (
	"bytes"
	"encoding/binary"
)

// load64 reads eight bytes of b at i (i+8 <= len(b)) as a little-endian word.
func load64(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

// indexByte returns the index of the first c in b at or after i, or -1.
func indexByte(b []byte, i int, c byte) int {
	if k := bytes.IndexByte(b[i:], c); k >= 0 {
		return i + k
	}
	return -1
}

// appendRun appends src to dst.
func appendRun(dst, src []byte) []byte { return append(dst, src...) }
