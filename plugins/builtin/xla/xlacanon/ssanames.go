package xlacanon

import "strconv"

// ssaNames renames MLIR SSA values (%0, %c, %cst_3, %arg0 …) to %0, %1, … in
// order of first appearance. The mapping is injective on names, so the
// renamed text parses to the same IR: printer-chosen names carry no meaning.
// All names, numeric ones too (one path for both keeps the scan loop
// small), go to an open-addressing table keyed by their bytes (no
// allocation, no map: maps are slow under wasm). Each new name's output text is rendered once (text), so that
// emitting it is a single word store.
type ssaNames struct {
	text  []uint64
	slots []ssaSlot
	used  int
	n     int32
	src   []byte
}

type ssaSlot struct {
	off, len int32 // name bytes in src; len 0 = empty slot
	hash     uint32
	val      int32
	key      uint64 // the name's bytes if it is at most eight long (see shortKey)
}

func (s *ssaNames) reset(src []byte) {
	s.text = s.text[:0]
	clear(s.slots)
	if len(s.slots) == 0 {
		s.slots = make([]ssaSlot, 256)
	}
	s.used = 0
	s.n = 0
	s.src = src
}

// next assigns the next new number and renders its text.
func (s *ssaNames) next() int32 {
	s.text = append(s.text, ssaText(s.n))
	s.n++
	return s.n - 1
}

// ssaText returns the output text of the new number k, "%k", as the bytes
// of a little-endian word with their count in its top byte, or 0 if they do
// not fit in seven bytes (k >= 1e6). Stored as a whole word, the text is
// followed by one garbage byte, overwritten by the next output.
func ssaText(k int32) uint64 {
	if k >= 1e6 {
		return 0
	}
	var w [8]byte
	w[0] = '%'
	t := strconv.AppendInt(w[:1], int64(k), 10)
	w[7] = byte(len(t))
	return load64(w[:], 0)
}

// shortKey returns the bytes of the name src[a:b] (b-a <= 8) as a
// little-endian word, zero above the name: equal names of equal length, and
// only they, have equal keys. One masked word load when the word is in src.
func shortKey(src []byte, a, b int) uint64 {
	if a+8 <= len(src) {
		return load64(src, a) & (1<<(8*uint(b-a)) - 1)
	}
	var k uint64
	for i := b - 1; i >= a; i-- {
		k = k<<8 | uint64(src[i])
	}
	return k
}

// shortHash hashes a shortKey (Fibonacci hashing: the high half of the
// product depends on all key bytes).
func shortHash(key uint64) uint32 { return uint32((key * 0x9e3779b97f4a7c15) >> 32) }

// homeSlot returns the slot where a name with shortKey key is looked up
// first (see lookup).
func (s *ssaNames) homeSlot(key uint64) *ssaSlot {
	return slotAt(s.slots, int(shortHash(key))&(len(s.slots)-1))
}

// lookup returns the new number of the SSA name src[a:b] (without '%').
// Names of up to eight bytes (most: %arg0, %cst_1, %c) are hashed and
// compared as one word (shortKey); longer ones byte by byte.
func (s *ssaNames) lookup(a, b int) int32 {
	id := s.src[a:b]
	var h uint32
	var key uint64
	if len(id) <= 8 {
		key = shortKey(s.src, a, b)
		h = shortHash(key)
	} else {
		h = uint32(2166136261)
		for _, c := range id {
			h = (h ^ uint32(c)) * 16777619
		}
	}
	mask := len(s.slots) - 1
	for k := int(h) & mask; ; k = (k + 1) & mask {
		sl := &s.slots[k]
		if sl.len == 0 {
			v := s.next()
			sl.off, sl.len, sl.hash, sl.key, sl.val = int32(a), int32(b-a), h, key, v
			s.used++
			if 2*s.used > len(s.slots) {
				s.grow()
			}
			return v
		}
		if int(sl.len) == len(id) && (len(id) <= 8 && sl.key == key ||
			len(id) > 8 && sl.hash == h && string(s.src[sl.off:sl.off+sl.len]) == string(id)) {
			return sl.val
		}
	}
}

func (s *ssaNames) grow() {
	old := s.slots
	s.slots = make([]ssaSlot, 2*len(old))
	mask := len(s.slots) - 1
	for _, sl := range old {
		if sl.len == 0 {
			continue
		}
		k := int(sl.hash) & mask
		for s.slots[k].len != 0 {
			k = (k + 1) & mask
		}
		s.slots[k] = sl
	}
}
