package jaxcache

import (
	"bufio"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
)

// ErrIncomplete means a -cache file is not a whole compressed JAX value: it
// is truncated (still being written) or not a JAX value at all.
var ErrIncomplete = errors.New("jax cache value is incomplete")

// Value describes a decoded JAX cache value.
type Value struct {
	// Compression is "zstd" or "zlib".
	Compression string
	// CompileSeconds is the compile time JAX recorded (whole seconds).
	CompileSeconds uint32
	// Size is the decompressed size, header included.
	Size int64
}

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// Inspect decompresses the file at path to its end and reports what it holds.
// JAX writes "compress(4-byte big-endian compile seconds ‖ executable)" with
// zstd or zlib; both formats end with a checksum or end marker, so a file
// that decodes to its end was written completely.
//
// # Errors
//   - ErrIncomplete (wrapped with the cause) when the file is truncated,
//     corrupt, or in neither format.
func Inspect(path string) (Value, error) {
	f, err := os.Open(path)
	if err != nil {
		return Value{}, err // names the path
	}
	defer f.Close()
	return InspectReader(f)
}

// InspectReader is Inspect on a reader.
func InspectReader(r io.Reader) (Value, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return Value{}, fmt.Errorf("%w: read header: %w", ErrIncomplete, err)
	}
	var v Value
	var dec io.Reader
	switch {
	case string(magic) == string(zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return Value{}, fmt.Errorf("%w: zstd: %w", ErrIncomplete, err)
		}
		defer zr.Close()
		v.Compression, dec = "zstd", zr
	case magic[0]&0x0f == 8 && (uint16(magic[0])<<8|uint16(magic[1]))%31 == 0:
		zr, err := zlib.NewReader(br)
		if err != nil {
			return Value{}, fmt.Errorf("%w: zlib: %w", ErrIncomplete, err)
		}
		defer zr.Close()
		v.Compression, dec = "zlib", zr
	default:
		return Value{}, fmt.Errorf("%w: neither zstd nor zlib data (starts % x)", ErrIncomplete, magic)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(dec, hdr[:]); err != nil {
		return Value{}, fmt.Errorf("%w: %s header: %w", ErrIncomplete, v.Compression, err)
	}
	v.CompileSeconds = binary.BigEndian.Uint32(hdr[:])
	n, err := io.Copy(io.Discard, dec)
	if err != nil {
		return Value{}, fmt.Errorf("%w: %s stream: %w", ErrIncomplete, v.Compression, err)
	}
	v.Size = n + 4
	// A complete stream must also be the whole file.
	if extra, _ := br.Read(make([]byte, 1)); extra > 0 {
		return Value{}, fmt.Errorf("%w: trailing bytes after the %s stream", ErrIncomplete, v.Compression)
	}
	return v, nil
}
