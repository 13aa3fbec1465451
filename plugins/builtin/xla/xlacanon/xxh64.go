package xlacanon

import "math/bits"

// XXH64 (xxHash, 64-bit, seed 0) labels the parts of a signature in its
// components. The components only explain misses (the key is the host's
// SHA-256 over the whole canonical record), and crypto/sha256 compiled to wasm
// runs at about 15 MB/s, slower than everything else the plugin does; XXH64
// runs at memory speed there.

// The primes are typed constants, so that the rounds multiply by
// immediates; the two sums the reference implementation lets wrap around
// (prime1+prime2, -prime1) are taken at run time in xxh64.
const (
	xxPrime1 uint64 = 11400714785074694791
	xxPrime2 uint64 = 14029467366897019727
	xxPrime3 uint64 = 1609587929392839161
	xxPrime4 uint64 = 9650029242287828579
	xxPrime5 uint64 = 2870177450012600261
)

func xxRound(acc, input uint64) uint64 {
	acc += input * xxPrime2
	acc = bits.RotateLeft64(acc, 31)
	return acc * xxPrime1
}

func xxMerge(acc, val uint64) uint64 {
	acc ^= xxRound(0, val)
	return acc*xxPrime1 + xxPrime4
}

func load32(b []byte, i int) uint64 {
	return uint64(b[i]) | uint64(b[i+1])<<8 | uint64(b[i+2])<<16 | uint64(b[i+3])<<24
}

// xxh64 returns the XXH64 digest (seed 0) of b.
func xxh64(b []byte) uint64 {
	n := len(b)
	i := 0
	var h uint64
	if n >= 32 {
		p1 := xxPrime1 // a variable: the sums below wrap around
		v1 := p1 + xxPrime2
		v2 := xxPrime2
		v3 := uint64(0)
		v4 := 0 - p1
		i, v1, v2, v3, v4 = xxStripes(b, v1, v2, v3, v4)
		h = bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
		h = xxMerge(h, v1)
		h = xxMerge(h, v2)
		h = xxMerge(h, v3)
		h = xxMerge(h, v4)
	} else {
		h = xxPrime5
	}
	h += uint64(n)
	for ; i+8 <= n; i += 8 {
		h ^= xxRound(0, load64(b, i))
		h = bits.RotateLeft64(h, 27)*xxPrime1 + xxPrime4
	}
	if i+4 <= n {
		h ^= load32(b, i) * xxPrime1
		h = bits.RotateLeft64(h, 23)*xxPrime2 + xxPrime3
		i += 4
	}
	for ; i < n; i++ {
		h ^= uint64(b[i]) * xxPrime5
		h = bits.RotateLeft64(h, 11) * xxPrime1
	}
	h ^= h >> 33
	h *= xxPrime2
	h ^= h >> 29
	h *= xxPrime3
	h ^= h >> 32
	return h
}
