package lease

import (
	"errors"
	"testing"
	"time"
)

// TestFairShares: a namespace that fills the table with leases, or its
// waiter places with long polls, no longer locks every other namespace out.
// Another namespace's request takes room back from the one holding more
// than half (its lease expiring first ends, one of its waiters is woken
// Displaced), until both hold half; past that, each is refused as before.
func TestFairShares(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	tb := New(Config{MaxLeases: 4, MaxWaiters: 4, Now: clk.Now})
	for i := byte(0); i < 4; i++ {
		if _, ok, err := tb.Acquire(ctx, "flood", key(i), "h", time.Duration(i+1)*time.Minute); err != nil || !ok {
			t.Fatalf("flood acquire %d: ok=%v err=%v", i, ok, err)
		}
	}
	first, _, ok, err := tb.Wait(ctx, "flood", key(0))
	if err != nil || !ok {
		t.Fatalf("wait: ok=%v err=%v", ok, err)
	}
	for _, tc := range []struct {
		ns   string
		k    byte
		want error
	}{
		{"other", 10, nil},          // flood holds 4 of 4: its first to expire ends
		{"other", 11, nil},          // flood holds 3
		{"other", 12, ErrTableFull}, // other holds its half
		{"flood", 13, ErrTableFull}, // and flood its own
	} {
		_, ok, err := tb.Acquire(ctx, tc.ns, key(tc.k), "h", time.Minute)
		if !errors.Is(err, tc.want) || ok != (tc.want == nil) {
			t.Fatalf("acquire %s/%d: ok=%v err=%v; want %v", tc.ns, tc.k, ok, err, tc.want)
		}
	}
	<-first.C()
	if first.Outcome() != Expired {
		t.Errorf("the displaced lease's waiter = %v, want expired", first.Outcome())
	}
	if _, held := tb.Holder(ctx, "flood", key(3)); !held {
		t.Errorf("flood's lease expiring last was ended; the first to expire should be")
	}

	var flood []*Waiter
	for range 4 {
		w, _, ok, err := tb.Wait(ctx, "flood", key(3))
		if err != nil || !ok {
			t.Fatalf("flood wait: ok=%v err=%v", ok, err)
		}
		flood = append(flood, w)
	}
	for i, want := range []error{nil, nil, ErrTooManyWaiters} {
		if _, _, _, err := tb.Wait(ctx, "other", key(10)); !errors.Is(err, want) {
			t.Fatalf("other wait %d: err=%v; want %v", i, err, want)
		}
	}
	displaced := 0
	for _, w := range flood {
		if w.Outcome() == Displaced {
			displaced++
		}
	}
	if displaced != 2 {
		t.Errorf("%d of flood's waiters displaced, want 2", displaced)
	}
	if held, waiting := tb.Counts(); held != 4 || waiting != 4 {
		t.Errorf("counts = %d held, %d waiting; want 4, 4", held, waiting)
	}
}
