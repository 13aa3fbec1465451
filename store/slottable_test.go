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

// TestAccountingModel runs random operations on the accounting and on a
// plain model of it (maps, no slab or tables) and compares every answer.
func TestAccountingModel(t *testing.T) {
	type token struct {
		blob [32]byte
		gen  int
		tok  *acctBlob
	}
	rng := rand.New(rand.NewPCG(3, 4))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	acc := newAccounting(0)
	live := map[entryRef][32]byte{}
	atime := map[entryRef]int{}
	held := map[entryRef][32]byte{}
	present := map[[32]byte]bool{}
	size := map[[32]byte]int64{}
	pins := map[[32]byte]int{}
	gen := map[[32]byte]int{}
	var tokens []token
	refs := func(b [32]byte) int {
		n := 0
		for _, x := range live {
			if x == b {
				n++
			}
		}
		for _, x := range held {
			if x == b {
				n++
			}
		}
		return n
	}
	forget := func(b [32]byte) {
		if refs(b) == 0 && pins[b] == 0 {
			present[b] = false
		}
	}
	for step := range 4000 {
		ref := entryRef{"ns" + string(rune('a'+rng.IntN(3))), Key{byte(rng.IntN(40))}}
		blob := [32]byte{byte(rng.IntN(30))}
		now := t0.Add(time.Duration(step) * time.Second)
		switch op := rng.IntN(10); op {
		case 0, 1, 2:
			sz := int64(1 + rng.IntN(1000))
			if rng.IntN(20) == 0 {
				sz = 5 << 30
			}
			if b, ok := held[ref]; ok { // as a Put does (replaceHeldLocked)
				acc.dropHeld(ref)
				delete(held, ref)
				forget(b)
			}
			if b, ok := live[ref]; ok {
				delete(live, ref)
				forget(b)
			}
			if !present[blob] {
				present[blob], size[blob], pins[blob] = true, sz, 0
				gen[blob]++
			}
			acc.add(ref, blob, sz, now)
			live[ref], atime[ref] = blob, step
		case 3:
			_, freed, ok := acc.remove(ref)
			b, had := live[ref]
			if had {
				delete(live, ref)
				forget(b)
			}
			if ok != had || freed != (had && !present[b]) {
				t.Fatalf("step %d: remove = freed %v, ok %v; model had %v", step, freed, ok, had)
			}
		case 4:
			_, ok := acc.touch(ref, now)
			if _, had := live[ref]; ok != had {
				t.Fatalf("step %d: touch ok %v, model %v", step, ok, had)
			} else if had {
				atime[ref] = step
			}
		case 5:
			if tok := acc.pin(blob); (tok != nil) != present[blob] {
				t.Fatalf("step %d: pin = %v, model present %v", step, tok, present[blob])
			} else if tok != nil {
				pins[blob]++
				tokens = append(tokens, token{blob, gen[blob], tok})
			}
		case 6:
			if len(tokens) == 0 {
				continue
			}
			i := rng.IntN(len(tokens))
			tk := tokens[i]
			tokens = append(tokens[:i], tokens[i+1:]...)
			free := acc.unpin(tk.blob, tk.tok)
			want := false
			if present[tk.blob] && gen[tk.blob] == tk.gen {
				pins[tk.blob]--
				forget(tk.blob)
				want = !present[tk.blob]
			}
			if free != want {
				t.Fatalf("step %d: unpin = %v, model %v", step, free, want)
			}
		case 7:
			acc.dropBlob(blob)
			if present[blob] && refs(blob) == 0 {
				present[blob] = false
			}
		case 8:
			acc.hold(ref, now, causeAdmin)
			if b, ok := live[ref]; ok {
				delete(live, ref)
				held[ref] = b
			}
		case 9:
			if rng.IntN(2) == 0 {
				acc.unhold(ref, now)
				if b, ok := held[ref]; ok {
					delete(held, ref)
					live[ref], atime[ref] = b, step
				}
			} else {
				acc.dropHeld(ref)
				if b, ok := held[ref]; ok {
					delete(held, ref)
					forget(b)
				}
			}
		}
		var bytes, blobs int64
		for b, p := range present {
			if p {
				bytes += size[b]
				blobs++
			}
			r, pn, ok := acc.blobRefs(b)
			if ok != p || p && (r != refs(b) || pn != pins[b]) || acc.hasBlob(b) != p {
				t.Fatalf("step %d: blob %d: refs %d pins %d stored %v; model %d %d %v", step, b[0], r, pn, ok, refs(b), pins[b], p)
			}
		}
		u := acc.usage()
		if u.Entries != int64(len(live)) || u.Quarantined != int64(len(held)) || u.Bytes != bytes || u.Blobs != blobs {
			t.Fatalf("step %d: usage %d entries %d held %d bytes %d blobs; model %d %d %d %d", step, u.Entries, u.Quarantined, u.Bytes, u.Blobs, len(live), len(held), bytes, blobs)
		}
		nsBytes := map[string]int64{}
		var oldest entryRef
		for r, b := range live {
			nsBytes[r.ns] += size[b]
			if oldest.ns == "" || atime[r] < atime[oldest] {
				oldest = r
			}
			_, lastRef, ok := acc.lookup(r)
			if !ok || lastRef != (refs(b) == 1 && pins[b] == 0) {
				t.Fatalf("step %d: lookup(%v) = lastRef %v, ok %v", step, r, lastRef, ok)
			}
		}
		for _, ns := range []string{"nsa", "nsb", "nsc"} {
			if got := acc.nsUsageOf(ns).Bytes; got != nsBytes[ns] {
				t.Fatalf("step %d: namespace %s holds %d bytes, model %d", step, ns, got, nsBytes[ns])
			}
		}
		if got, ok := acc.oldest(); ok != (len(live) > 0) || ok && got != oldest {
			t.Fatalf("step %d: oldest = %v, %v; model %v", step, got, ok, oldest)
		}
	}
}
