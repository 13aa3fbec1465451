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
