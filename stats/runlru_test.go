package stats

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// scanVictim is the eviction rule by its definition, a scan of every slot:
// the least recently seen slot (ties: admitted first) of the namespace
// holding the most (ties: the one whose least recently seen is older).
func scanVictim(slots []*runSlot) *runSlot {
	older := func(a, b *runSlot) bool {
		al, bl := a.last.Load(), b.last.Load()
		return al < bl || al == bl && a.seq < b.seq
	}
	type share struct {
		n      int
		oldest *runSlot
	}
	shares := map[string]*share{}
	for _, sl := range slots {
		sh := shares[sl.ns]
		if sh == nil {
			sh = &share{}
			shares[sl.ns] = sh
		}
		sh.n++
		if sh.oldest == nil || older(sl, sh.oldest) {
			sh.oldest = sl
		}
	}
	var v *share
	for _, sh := range shares {
		if v == nil || sh.n > v.n || sh.n == v.n && older(sh.oldest, v.oldest) {
			v = sh
		}
	}
	if v == nil {
		return nil
	}
	return v.oldest
}

// TestRunLRUPicksWhatAScanWould: through random admissions, touches
// (lock-free stores of last, as requests make them, several per second
// or none for a while), namespace changes and evictions, runLRU's victim is
// always the slot a scan of every slot picks.
func TestRunLRUPicksWhatAScanWould(t *testing.T) {
	tests := []struct {
		name          string
		namespaces    int
		size, ops     int
		touchesPerOp  int
		moveOneIn     int // a namespace change every moveOneIn ops; 0 never
		sameSecondOps int // ops per clock second (ties on last)
	}{
		{"one namespace", 1, 50, 2000, 3, 0, 1},
		{"many namespaces", 7, 60, 3000, 5, 0, 1},
		{"ties in the same second", 3, 40, 3000, 4, 0, 10},
		{"namespaces change", 4, 40, 3000, 4, 5, 2},
		{"a table of one", 2, 1, 500, 1, 3, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(tt.name))))
			l := newRunLRU()
			var slots []*runSlot // in the table
			var seq uint64
			now := int64(1000)
			ns := func() string { return fmt.Sprint("ns-", rng.IntN(tt.namespaces)) }
			for op := range tt.ops {
				if op%tt.sameSecondOps == 0 {
					now++
				}
				for range tt.touchesPerOp {
					if len(slots) > 0 {
						slots[rng.IntN(len(slots))].last.Store(now)
					}
				}
				if tt.moveOneIn > 0 && op%tt.moveOneIn == 0 && len(slots) > 0 {
					sl := slots[rng.IntN(len(slots))]
					l.remove(sl)
					sl.ns = ns()
					l.add(sl)
				}
				if len(slots) >= tt.size {
					want := scanVictim(slots)
					got := l.victim()
					if got != want {
						t.Fatalf("op %d: victim %s (%s, last %d, seq %d), a scan picks %s (%s, last %d, seq %d)",
							op, got.name, got.ns, got.last.Load(), got.seq, want.name, want.ns, want.last.Load(), want.seq)
					}
					l.remove(got)
					for i, sl := range slots {
						if sl == got {
							slots = append(slots[:i], slots[i+1:]...)
							break
						}
					}
				}
				seq++
				sl := &runSlot{name: fmt.Sprint("run-", op), ns: ns(), seq: seq}
				sl.last.Store(now)
				l.add(sl)
				slots = append(slots, sl)
			}
			if v := newRunLRU(); v.victim() != nil {
				t.Errorf("an empty order has a victim")
			}
		})
	}
}
