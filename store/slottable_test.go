package store

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestSlotTable checks the index against a map under random inserts and
// deletes, with hashes that spread, that collide in their home cell (long
// probe runs that wrap) and that collide entirely (the tag cannot help).
func TestSlotTable(t *testing.T) {
	tests := []struct {
		name string
		hash func(v uint64) uint64
		ops  int
	}{
		{"spread", func(v uint64) uint64 { return v * 0x9E3779B97F4A7C15 }, 20000},
		{"same home cell", func(v uint64) uint64 { return (v * 0x9E3779B97F4A7C15) &^ 0xFFFFFFFF }, 3000},
		{"same hash", func(uint64) uint64 { return 42 }, 1500},
		{"home at the end", func(v uint64) uint64 { return (v*0x9E3779B97F4A7C15)&^0xFFFFFFFF | 0xFFFFFFFF }, 3000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			// vals[s] is the value slot s indexes; in holds the values indexed.
			vals := map[uint32]uint64{}
			in := map[uint64]uint32{}
			var tab slotTable
			hashOf := func(s uint32) uint64 { return tc.hash(vals[s]) }
			next := uint32(0)
			for op := range tc.ops {
				v := uint64(rng.IntN(tc.ops / 2))
				cell, s, ok := tab.find(tc.hash(v), func(s uint32) bool { return vals[s] == v })
				want, had := in[v]
				if ok != had || ok && s != want {
					t.Fatalf("op %d: find(%d) = slot %d, %v; want %d, %v", op, v, s, ok, want, had)
				}
				switch {
				case ok && rng.IntN(2) == 0:
					tab.deleteAt(cell, hashOf)
					delete(in, v)
				case !ok:
					s := next
					if rng.IntN(50) == 0 {
						s += 1 << 17 // a slot past the cells' index bits: the table widens them
					}
					next = s + 1
					vals[s] = v
					tab.insert(tc.hash(v), s, hashOf)
					in[v] = s
				}
				if tab.n != len(in) {
					t.Fatalf("op %d: table holds %d, want %d", op, tab.n, len(in))
				}
			}
			for v, want := range in {
				if _, s, ok := tab.find(tc.hash(v), func(s uint32) bool { return vals[s] == v }); !ok || s != want {
					t.Fatalf("final find(%d) = %d, %v; want %d", v, s, ok, want)
				}
			}
		})
	}
}

// TestAccountingBlobPlacement checks the accounting's answers as blobs move
// between inline (one entry) and shared (several entries, a pin, a held
// entry) and back to freed.
func TestAccountingBlobPlacement(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b, c := entryRef{"x", keyOf("a")}, entryRef{"y", keyOf("b")}, entryRef{"x", keyOf("c")}
	blob := [32]byte{7}
	type want struct {
		refs, pins int
		stored     bool
		lastRefOfA bool
		bytes      int64
		blobs      int64
		nsX, nsY   int64 // namespace bytes
	}
	steps := []struct {
		name string
		do   func(acc *accounting)
		want want
	}{
		{"one entry: inline", func(acc *accounting) { acc.add(a, blob, 100, now) }, want{1, 0, true, true, 100, 1, 100, 0}},
		{"second entry in another namespace: shared", func(acc *accounting) { acc.add(b, blob, 100, now) }, want{2, 0, true, false, 100, 1, 100, 100}},
		{"first goes: still stored", func(acc *accounting) { acc.remove(b) }, want{1, 0, true, true, 100, 1, 100, 0}},
		{"held", func(acc *accounting) { acc.hold(a, now, causeAdmin) }, want{1, 0, true, false, 100, 1, 0, 0}},
		{"restored", func(acc *accounting) { acc.unhold(a, now) }, want{1, 0, true, true, 100, 1, 100, 0}},
		{"pinned", func(acc *accounting) { acc.pin(blob) }, want{1, 1, true, false, 100, 1, 100, 0}},
		{"last entry goes, pin keeps it", func(acc *accounting) { acc.remove(a) }, want{0, 1, true, false, 100, 1, 0, 0}},
		{"dropped", func(acc *accounting) { acc.dropBlob(blob) }, want{0, 0, false, false, 0, 0, 0, 0}},
		{"large blob is shared from the start", func(acc *accounting) { acc.add(c, blob, 5<<30, now) }, want{1, 0, true, false, 5 << 30, 1, 5 << 30, 0}},
	}
	acc := newAccounting(0)
	for _, st := range steps {
		st.do(acc)
		refs, pins, stored := acc.blobRefs(blob)
		_, lastRef, _ := acc.lookup(a)
		u := acc.usage()
		got := want{refs, pins, stored, lastRef, u.Bytes, u.Blobs, acc.nsUsageOf("x").Bytes, acc.nsUsageOf("y").Bytes}
		if got != st.want {
			t.Fatalf("%s: got %+v, want %+v", st.name, got, st.want)
		}
		if stored != acc.hasBlob(blob) {
			t.Fatalf("%s: hasBlob = %v, blobRefs stored = %v", st.name, acc.hasBlob(blob), stored)
		}
	}
	if refs := acc.refsTo(blob); len(refs) != 1 || refs[0] != c {
		t.Fatalf("refsTo = %v, want [%v]", refs, c)
	}
}
