package store

import "math/bits"

// slotTable is an open-addressing hash index (linear probing) from a 64-bit
// hash to a uint32 slot of the entry slab: 4 bytes per table cell, so 4.4
// to 5.6 bytes per indexed slot at the loads it keeps (between 0.72 and
// 0.9: it grows by a quarter), where a Go map of the same pairs costs 20 to
// 40. The load is high for linear probing, but a probe scans 4-byte cells
// and their tags, not keys: a miss reads a few cache lines.
//
// A cell holds slot+1 (0 is empty) in its low ib bits and, above them, a tag
// of the hash's high bits, so a probe compares the full key (a slab access)
// only when the tag matches. The table does not store keys: find takes the
// comparison and the methods that move cells take hashOf, which recomputes
// a slot's hash from the slab. It is not safe for concurrent use.
type slotTable struct {
	cells []uint32
	n     int  // occupied cells
	ib    uint // bits of a cell that hold slot+1; the rest are the tag
}

// minTableCells is the size of a table's first allocation.
const minTableCells = 64

// home returns the cell where a hash's probe starts: the low 32 bits scaled
// to the table (so the table needs no power-of-two size).
func (t *slotTable) home(h uint64) int {
	return int((uint64(uint32(h)) * uint64(len(t.cells))) >> 32)
}

// tag returns the bits of h a cell keeps beside its slot.
func (t *slotTable) tag(h uint64) uint32 {
	if t.ib >= 32 {
		return 0
	}
	return uint32(h>>32) >> t.ib
}

// slotOf returns the slot a non-empty cell names.
func (t *slotTable) slotOf(c uint32) uint32 {
	return (c & (1<<t.ib - 1)) - 1
}

// find returns the cell and slot of the first slot with hash h that eq
// accepts, or ok false.
func (t *slotTable) find(h uint64, eq func(slot uint32) bool) (cell int, slot uint32, ok bool) {
	if len(t.cells) == 0 {
		return 0, 0, false
	}
	tag := t.tag(h)
	for i := t.home(h); ; {
		c := t.cells[i]
		if c == 0 {
			return 0, 0, false
		}
		if c>>t.ib == tag || t.ib >= 32 {
			if s := t.slotOf(c); eq(s) {
				return i, s, true
			}
		}
		if i++; i == len(t.cells) {
			i = 0
		}
	}
}

// insert indexes slot under hash h (the caller checked it is absent).
func (t *slotTable) insert(h uint64, slot uint32, hashOf func(slot uint32) uint64) {
	need := uint(bits.Len32(slot + 1))
	if need > t.ib || t.full(t.n+1) {
		cells := len(t.cells)
		if t.full(t.n + 1) {
			cells = max(minTableCells, cells+cells/4)
		}
		t.rebuild(cells, max(need, t.ib, 16), hashOf)
	}
	t.put(h, slot)
}

// full reports whether n occupied cells would pass the table's maximum
// load, 0.9.
func (t *slotTable) full(n int) bool { return n*10 > len(t.cells)*9 }

// put writes slot into the first empty cell of h's probe.
func (t *slotTable) put(h uint64, slot uint32) {
	i := t.home(h)
	for t.cells[i] != 0 {
		if i++; i == len(t.cells) {
			i = 0
		}
	}
	t.cells[i] = t.tag(h)<<t.ib | (slot + 1)
	if t.ib >= 32 {
		t.cells[i] = slot + 1
	}
	t.n++
}

// reserve grows the table so that n slots fit at a load of 0.85 (a restart
// loads every entry at once: one rebuild instead of many).
func (t *slotTable) reserve(n int, hashOf func(slot uint32) uint64) {
	if cells := n * 20 / 17; cells > len(t.cells) {
		t.rebuild(max(cells, minTableCells), max(t.ib, 16, uint(bits.Len32(uint32(n)))), hashOf)
	}
}

// rebuild reindexes every slot into a table of cells cells with ib slot bits.
func (t *slotTable) rebuild(cells int, ib uint, hashOf func(slot uint32) uint64) {
	old, oldIB := t.cells, t.ib
	t.cells, t.ib, t.n = make([]uint32, cells), ib, 0
	for _, c := range old {
		if c != 0 {
			s := (c & (1<<oldIB - 1)) - 1
			t.put(hashOf(s), s)
		}
	}
}

// deleteAt empties a cell that find returned, shifting back the cells of
// the probe run after it so that no later find stops early (no tombstones).
func (t *slotTable) deleteAt(i int, hashOf func(slot uint32) uint64) {
	t.cells[i] = 0
	t.n--
	for j := i; ; {
		if j++; j == len(t.cells) {
			j = 0
		}
		c := t.cells[j]
		if c == 0 {
			return
		}
		k := t.home(hashOf(t.slotOf(c)))
		// The cell at j may move to the hole at i unless its home lies
		// cyclically in (i, j].
		if (i <= j && (k <= i || k > j)) || (i > j && k <= i && k > j) {
			t.cells[i], t.cells[j] = c, 0
			i = j
		}
	}
}
