package xlacanon

import (
	"strings"
	"testing"
)

func TestXXH64Vectors(t *testing.T) {
	// Reference values from github.com/cespare/xxhash/v2 Sum64String.
	tests := []struct {
		in   string
		want uint64
	}{
		{"", 0xef46db3751d8e999},
		{"a", 0xd24ec4f1a98c6e5b},
		{"abc", 0x44bc2cf5ad770999},
		{strings.Repeat("a", 100), 0x375041e8b1decfb3},
		{"0123456789abcdef0123456789abcdefXYZ1234", 0x05b843d538e46d2f},
	}
	for _, tt := range tests {
		if got := xxh64([]byte(tt.in)); got != tt.want {
			t.Errorf("xxh64(%q) = %016x, want %016x", tt.in, got, tt.want)
		}
	}
}

// xxPattern returns n deterministic bytes with every byte value present.
func xxPattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*131 + i>>8*7 + 1)
	}
	return b
}

// TestXXH64StripeLengths covers the lengths around the stripe loops' edges
// (one 32-byte stripe, the two-stripe step of the wasm loop and their
// tails), at every alignment of the input.
func TestXXH64StripeLengths(t *testing.T) {
	// Reference values from github.com/cespare/xxhash/v2 Sum64(xxPattern(n)).
	tests := []struct {
		n    int
		want uint64
	}{
		{31, 0xf2e176a3af059d3b},
		{32, 0xfe1388a454390dcf},
		{33, 0xe21f50b5506f39b3},
		{63, 0xfe21a6cb773bafc7},
		{64, 0x002ab26e2253326d},
		{65, 0xf296f63a43a996a2},
		{95, 0x438a33da05b235b5},
		{96, 0x0c90e235adbd7fa6},
		{100, 0x6f9f25633e0b46e9},
		{127, 0x771598afb37ccf82},
		{128, 0x693f73a48ef1cf1c},
		{129, 0x6de0ea78acc90e32},
		{1000, 0xfa0b24084532cdcc},
		{4099, 0xf7913b8e3c3132a5},
	}
	for _, tt := range tests {
		p := xxPattern(tt.n)
		for off := 0; off < 8; off++ {
			b := append(make([]byte, off), p...)[off:]
			if got := xxh64(b); got != tt.want {
				t.Errorf("xxh64(xxPattern(%d)) at offset %d = %016x, want %016x", tt.n, off, got, tt.want)
			}
		}
	}
}
