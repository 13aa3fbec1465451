//go:build wasip1

package sdk

import "unsafe"

// Buffers the host reads or writes. Go's collector does not move objects, so
// a slice referenced from a package variable stays at its address until the
// variable is overwritten by the next call (see "Memory ownership" in ABI.md).
var (
	inBuf  []byte // written by the host after alloc, read by canonicalize
	outBuf []byte // describe/canonicalize JSON, reused across calls
	canon  []byte // Result.Canonical of the last canonicalize call
)

// alloc returns the address of an n-byte buffer for the host to write the
// next canonicalize input into. The buffer is reused when large enough.
//
//go:wasmexport alloc
func alloc(n uint32) uint32 {
	if uint32(cap(inBuf)) < n || cap(inBuf) == 0 {
		c := n
		if c == 0 {
			c = 1
		}
		inBuf = make([]byte, c)
	}
	inBuf = inBuf[:n]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(inBuf[:cap(inBuf)]))))
}

// describe returns the packed (ptr<<32 | len) describe JSON.
//
//go:wasmexport describe
func describe() uint64 {
	canon = nil
	outBuf = AppendDescribe(outBuf[:0], registered)
	return pack(outBuf)
}

// canonicalize runs the registered function on the n bytes at ptr (which
// must be the buffer returned by the latest alloc) and returns the packed
// result JSON.
//
//go:wasmexport canonicalize
func canonicalize(ptr, n uint32) uint64 {
	canon = nil
	outBuf = outBuf[:0]
	if handler == nil {
		outBuf = AppendError(outBuf, "sdk: no canonicalize function registered")
		return pack(outBuf)
	}
	in, ok := input(ptr, n)
	if !ok {
		outBuf = AppendError(outBuf, "sdk: canonicalize input is not the buffer returned by alloc")
		return pack(outBuf)
	}
	res, err := handler(in)
	if err != nil {
		outBuf = AppendError(outBuf, err.Error())
		return pack(outBuf)
	}
	canon = res.Canonical
	var p uint32
	if len(canon) > 0 {
		p = uint32(uintptr(unsafe.Pointer(unsafe.SliceData(canon))))
	}
	outBuf = AppendResult(outBuf, res, p)
	return pack(outBuf)
}

// normalize runs the registered normalize function (see ABI.md).
//
//go:wasmexport normalize
func normalize(ptr, n uint32) uint64 {
	canon = nil
	outBuf = outBuf[:0]
	if normalizer == nil {
		outBuf = append(outBuf, `{"unsupported":true}`...)
		return pack(outBuf)
	}
	in, ok := input(ptr, n)
	if !ok {
		outBuf = AppendError(outBuf, "sdk: normalize input is not the buffer returned by alloc")
		return pack(outBuf)
	}
	norm, err := normalizer(in)
	if err != nil {
		outBuf = AppendError(outBuf, err.Error())
		return pack(outBuf)
	}
	canon = norm
	var p uint32
	if len(norm) > 0 {
		p = uint32(uintptr(unsafe.Pointer(unsafe.SliceData(norm))))
	}
	outBuf = AppendNormalized(outBuf, p, len(norm))
	return pack(outBuf)
}

// input returns the n bytes at ptr if they lie in the buffer from alloc.
func input(ptr, n uint32) ([]byte, bool) {
	if cap(inBuf) == 0 || uint32(uintptr(unsafe.Pointer(unsafe.SliceData(inBuf[:cap(inBuf)])))) != ptr || uint32(cap(inBuf)) < n {
		return nil, false
	}
	return inBuf[:n], true
}

func pack(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))<<32 | uint64(len(b))
}
