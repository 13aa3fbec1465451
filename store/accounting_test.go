package store

import (
	"testing"
	"time"
)

func TestAccounting(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ref := func(name string) entryRef { return entryRef{"default", keyOf(name)} }
	blob := func(b byte) [32]byte { return [32]byte{b} }

	type step struct {
		op      string // add, remove, touch
		name    string
		blob    byte
		size    int64
		t       int
		newBlob bool // add: want newBlob; remove: want freed
	}
	tests := []struct {
		name       string
		max        int64
		steps      []step
		wantOldest string
		wantBytes  int64
		wantBlobs  int64
		fits       int64 // fits(fits) must be true, fits(fits+1) false
	}{
		{
			name:       "add three, oldest is first",
			max:        300,
			steps:      []step{{"add", "a", 1, 100, 1, true}, {"add", "b", 2, 100, 2, true}, {"add", "c", 3, 100, 3, true}},
			wantOldest: "a", wantBytes: 300, wantBlobs: 3, fits: 0,
		},
		{
			name: "touch moves to the front",
			max:  300,
			steps: []step{{"add", "a", 1, 100, 1, true}, {"add", "b", 2, 100, 2, true}, {"add", "c", 3, 100, 3, true},
				{"touch", "a", 0, 0, 4, false}},
			wantOldest: "b", wantBytes: 300, wantBlobs: 3, fits: 0,
		},
		{
			name: "shared blob counted once and freed with its last entry",
			max:  1000,
			steps: []step{{"add", "a", 1, 100, 1, true}, {"add", "b", 1, 100, 2, false}, {"add", "c", 2, 50, 3, true},
				{"remove", "a", 0, 0, 0, false}},
			wantOldest: "b", wantBytes: 150, wantBlobs: 2, fits: 850,
		},
		{
			name: "removing the last reference frees the bytes",
			max:  1000,
			steps: []step{{"add", "a", 1, 100, 1, true}, {"add", "b", 1, 100, 2, false},
				{"remove", "a", 0, 0, 0, false}, {"remove", "b", 0, 0, 0, true}},
			wantOldest: "", wantBytes: 0, wantBlobs: 0, fits: 1000,
		},
		{
			name:       "unlimited always fits",
			max:        0,
			steps:      []step{{"add", "a", 1, 1 << 40, 1, true}},
			wantOldest: "a", wantBytes: 1 << 40, wantBlobs: 1, fits: -1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAccounting(tc.max)
			for _, s := range tc.steps {
				switch s.op {
				case "add":
					if got := a.add(ref(s.name), blob(s.blob), s.size, at(s.t)); got != s.newBlob {
						t.Fatalf("add %s: newBlob %v, want %v", s.name, got, s.newBlob)
					}
				case "remove":
					_, freed, ok := a.remove(ref(s.name))
					if !ok || freed != s.newBlob {
						t.Fatalf("remove %s: freed %v ok %v, want freed %v", s.name, freed, ok, s.newBlob)
					}
				case "touch":
					if _, ok := a.touch(ref(s.name), at(s.t)); !ok {
						t.Fatalf("touch %s: unknown", s.name)
					}
				}
			}
			oldest, ok := a.oldest()
			if tc.wantOldest == "" {
				if ok {
					t.Fatalf("oldest = %v, want none", oldest)
				}
			} else if !ok || oldest != ref(tc.wantOldest) {
				t.Fatalf("oldest = %v, want %s", oldest, tc.wantOldest)
			}
			u := a.usage()
			if u.Bytes != tc.wantBytes || u.Blobs != tc.wantBlobs {
				t.Fatalf("usage = %+v, want bytes %d blobs %d", u, tc.wantBytes, tc.wantBlobs)
			}
			if tc.fits >= 0 && (!a.fits(tc.fits) || a.fits(tc.fits+1)) {
				t.Fatalf("fits(%d) = %v, fits(%d) = %v", tc.fits, a.fits(tc.fits), tc.fits+1, a.fits(tc.fits+1))
			}
			if tc.fits < 0 && !a.fits(1<<50) {
				t.Fatal("unlimited accounting refused bytes")
			}
		})
	}
}

func TestAccountingLoadOrdersByAccess(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAccounting(0)
	a.load([]loadedEntry{
		{entryRef{"default", keyOf("new")}, [32]byte{1}, 10, t0.Add(3 * time.Hour)},
		{entryRef{"default", keyOf("old")}, [32]byte{2}, 10, t0},
		{entryRef{"default", keyOf("mid")}, [32]byte{3}, 10, t0.Add(time.Hour)},
	})
	var order []Key
	for {
		ref, ok := a.oldest()
		if !ok {
			break
		}
		order = append(order, ref.key)
		a.remove(ref)
	}
	want := []Key{keyOf("old"), keyOf("mid"), keyOf("new")}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("eviction order %d = %v, want %v", i, order[i], want[i])
		}
	}
}

func TestAccountingReservations(t *testing.T) {
	a := newAccounting(100)
	a.add(entryRef{"default", keyOf("a")}, [32]byte{1}, 60, time.Now())
	if a.fits(50) || !a.possible(50) {
		t.Fatal("50 bytes should need eviction but be possible")
	}
	a.reserve(30)
	if !a.fits(10) || a.fits(11) {
		t.Fatal("reservation not counted")
	}
	if a.possible(71) {
		t.Fatal("71 bytes cannot fit beside a 30 byte reservation")
	}
	a.release(30)
	if !a.fits(40) {
		t.Fatal("release did not return the bytes")
	}
}

func TestAccountingDirtyAccesses(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAccounting(0)
	r := entryRef{"default", keyOf("a")}
	a.add(r, [32]byte{1}, 1, t0)
	if len(a.dirtyAccesses()) != 0 {
		t.Fatal("new entry is dirty")
	}
	a.touch(r, t0.Add(time.Second))
	a.touch(r, t0.Add(2*time.Second))
	ups := a.dirtyAccesses()
	if len(ups) != 1 || ups[0].hits != 2 || !ups[0].atime.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("dirty = %+v", ups)
	}
	// An access between taking and storing the update stays pending.
	a.touch(r, t0.Add(3*time.Second))
	a.flushed(ups[0])
	if _, hits, _ := a.access(r); hits != 1 {
		t.Fatalf("pending hits after flush = %d, want 1", hits)
	}
	if len(a.dirtyAccesses()) != 1 {
		t.Fatal("later access lost its dirty mark")
	}
}
