package stats

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// TestMissesDoNotCreateNamespaces is issue 12's bug 9: one GET miss in any
// valid-looking namespace created a namespace in the stats, and 64 are
// tracked, so a reader could push every real namespace into Other.
func TestMissesDoNotCreateNamespaces(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.AdmitNamespace("default")
	s.RecordWrite(Write{Namespace: "team-a", Backend: "xla", Key: key(1), Bytes: 10})
	fresh := func(i int) string { return fmt.Sprintf("%s%03d", strings.Repeat("a", 60), i) }
	for i := range 100 {
		s.RecordLookup(Lookup{Namespace: fresh(i), Key: key(i)})
		s.RecordMiss(Miss{Namespace: fresh(i), Key: fmt.Sprint(i)})
		s.RecordEvictions(fresh(i), "xla", wire.ReasonSize, 1)
	}
	// Namespaces that hold entries after the flood still get their rows.
	s.RecordWrite(Write{Namespace: "team-b", Backend: "xla", Key: key(2), Bytes: 10})
	s.RecordLookup(Lookup{Namespace: "team-b", Backend: "xla", Key: key(2), Hit: true})
	s.RecordLookup(Lookup{Namespace: "default", Key: key(3)})
	check := func(when string, s *Stats) {
		t.Helper()
		snap := s.Snapshot(SnapshotOptions{})
		var names []string
		for _, n := range snap.Namespaces {
			names = append(names, n.Namespace)
		}
		if got := strings.Join(names, ","); got != Other+",default,team-a,team-b" {
			t.Fatalf("%s: namespaces %s", when, got)
		}
		if tot := snap.Totals; tot.Misses != 101 || tot.Hits != 1 || tot.Writes != 2 || tot.Evictions != 100 {
			t.Fatalf("%s: totals = %+v", when, tot)
		}
		if snap.Namespaces[0].Misses != 100 {
			t.Fatalf("%s: %s = %+v", when, Other, snap.Namespaces[0])
		}
		if rep := s.Misses(Other, 0); rep.Total != 100 {
			t.Fatalf("%s: misses under %s = %d", when, Other, rep.Total)
		}
		if rep := s.Misses(fresh(1), 0); rep.Total != 0 {
			t.Fatalf("%s: misses of a namespace never admitted = %d", when, rep.Total)
		}
		ser, err := s.Series("", time.Now().Add(-time.Hour), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ser.Namespaces) != 4 {
			t.Fatalf("%s: series namespaces = %d", when, len(ser.Namespaces))
		}
	}
	check("recorded", s)
	s2 := reopen(t, s, dir)
	check("reopened", s2)
}

// TestMissOnlyNamespacesOnDiskFold loads a database as the code before the
// fix left it: namespaces with only misses are folded into Other, once.
func TestMissOnlyNamespacesOnDiskFold(t *testing.T) {
	dir := t.TempDir()
	miss := Counters{Lookups: 1, Misses: 1}
	writeRaw(t, dir, map[string]any{
		pTotals + "team-a\x00xla":                 Counters{Lookups: 2, Hits: 1, Misses: 1, Writes: 1},
		pTotals + "team-a\x00" + UnknownBackend:   miss, // a miss by key, in a real namespace
		pTotals + "probe-1\x00" + UnknownBackend:  miss,
		pTotals + "probe-2\x00" + UnknownBackend:  miss,
		pTotals + Other + "\x00" + UnknownBackend: miss,
		pMisses + "probe-1":                       persistedMisses{Recent: []Miss{{Namespace: "probe-1", Backend: UnknownBackend, Key: "k1"}}, Reasons: map[string]int64{"unexplained": 1}},
	})
	for i, when := range []string{"loaded", "reloaded"} {
		s, err := Open(Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		extra := int64(i) // the lookup in probe-1 below, from the round before
		snap := s.Snapshot(SnapshotOptions{})
		if len(snap.Namespaces) != 2 || snap.Namespaces[0].Namespace != Other || snap.Namespaces[0].Misses != 3+extra || snap.Namespaces[1].Namespace != "team-a" || snap.Namespaces[1].Misses != 2 {
			t.Fatalf("%s: namespaces = %+v", when, snap.Namespaces)
		}
		if snap.Totals.Lookups != 6+extra || snap.Totals.Misses != 5+extra {
			t.Fatalf("%s: totals = %+v", when, snap.Totals)
		}
		if rep := s.Misses(Other, 0); rep.Total != 1 || len(rep.Recent) != 1 {
			t.Fatalf("%s: misses under %s = %+v", when, Other, rep)
		}
		// A lookup in a folded namespace stays under Other: it is admitted
		// only once it holds entries.
		s.RecordLookup(Lookup{Namespace: "probe-1"})
		if n := s.Snapshot(SnapshotOptions{Namespace: "probe-1"}).Namespaces; len(n) != 0 {
			t.Fatalf("%s: probe-1 = %+v", when, n)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAdmitNamespace(t *testing.T) {
	s, err := Open(Config{MaxNamespaces: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, ns := range []string{"default", "team-a", "\xff", "", Other, "team-b", "team-c", "team-d"} {
		s.AdmitNamespace(ns)
	}
	tests := []struct {
		ns, want string
	}{
		{"default", "default"}, {"team-a", "team-a"}, {"team-b", "team-b"},
		{"team-c", Other}, {"team-d", Other}, {"\xff", Other}, {"never", Other},
	}
	for _, tt := range tests {
		t.Run(tt.ns, func(t *testing.T) {
			if got := s.namespaces.labelOf(tt.ns); got != tt.want {
				t.Fatalf("label = %q, want %q", got, tt.want)
			}
		})
	}
	ns := strings.Clone("team-a") // not the admitted copy
	if n := testing.AllocsPerRun(100, func() { s.AdmitNamespace(ns) }); n != 0 {
		t.Fatalf("AdmitNamespace of an admitted namespace allocates %v times", n)
	}
}

// TestAdmissionsPersistWithinTheCap checks that admissions survive a
// restart and that those beyond MaxNamespaces are dropped from disk.
func TestAdmissionsPersistWithinTheCap(t *testing.T) {
	dir := t.TempDir()
	writeRaw(t, dir, map[string]any{pAdmit + "a": nil, pAdmit + "b": nil, pAdmit + "c": nil})
	s, err := Open(Config{Dir: dir, MaxNamespaces: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{s.namespaces.labelOf("a"), s.namespaces.labelOf("b"), s.namespaces.labelOf("c")}; got[0] != "a" || got[1] != "b" || got[2] != Other {
		t.Fatalf("labels = %q", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Config{Dir: dir, MaxNamespaces: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.namespaces.labelOf("c"); got != Other {
		t.Fatalf("c = %q: its admission was kept beyond the cap", got)
	}
	s.RecordLookup(Lookup{Namespace: "b"})
	if n := s.Snapshot(SnapshotOptions{}).Namespaces; len(n) != 1 || n[0].Namespace != "b" {
		t.Fatalf("namespaces = %+v", n)
	}
}

// TestLookupAdmit: a lookup with Admit (a caller that may write there)
// admits its namespace up to MaxNamespaces, so a fresh namespace's first
// misses count under its name; one without Admit admits nothing.
func TestLookupAdmit(t *testing.T) {
	s, err := Open(Config{MaxNamespaces: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.AdmitNamespace("default")
	tests := []struct {
		ns    string
		admit bool
		want  string // the label its lookups count under
	}{
		{"reader-ns", false, Other},
		{"sweep-a", true, "sweep-a"},
		{"sweep-a", false, "sweep-a"},
		{"sweep-b", true, "sweep-b"},
		{"sweep-c", true, Other}, // beyond the cap
		{"\xff", true, Other},
	}
	for _, tt := range tests {
		s.RecordLookup(Lookup{Namespace: tt.ns, Admit: tt.admit, Key: key(1)})
		if got := s.namespaces.labelOf(tt.ns); got != tt.want {
			t.Errorf("lookup in %q (admit %v): counts under %q, want %q", tt.ns, tt.admit, got, tt.want)
		}
	}
	rows := map[string]int64{}
	for _, n := range s.Snapshot(SnapshotOptions{}).Namespaces {
		rows[n.Namespace] = n.Misses
	}
	if rows["sweep-a"] != 2 || rows["sweep-b"] != 1 || rows[Other] != 3 {
		t.Errorf("misses by namespace %v, want sweep-a 2, sweep-b 1, %s 3", rows, Other)
	}
	for _, ns := range []string{strings.Clone("sweep-a"), "sweep-c"} {
		if n := testing.AllocsPerRun(100, func() { s.namespaces.admit(ns) }); n != 0 {
			t.Errorf("admit(%q) allocates %v times", ns, n)
		}
	}
}
