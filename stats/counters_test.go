package stats

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/cachesvc/cachesvc/wire"
)

// writeRaw writes records into a closed stats database in dir as the code
// of the time wrote them (JSON values under the keys of persist.go), so that
// a test can load what an older server left behind.
func writeRaw(t *testing.T, dir string, records map[string]any) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(txn *badger.Txn) error {
		for k, v := range records {
			data, err := json.Marshal(v)
			if err != nil {
				return err
			}
			if err := txn.Set([]byte(k), data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func hexKey(k [32]byte) string { return hex.EncodeToString(k[:]) }

// TestAbsurdCompileSecondsSaturate is issue 12's bug 2: X-Compile-Seconds
// 1e308 on an entry made compile_seconds_saved negative after three hits.
func TestAbsurdCompileSecondsSaturate(t *testing.T) {
	tests := []struct {
		name    string
		seconds float64
		want    float64 // saved by the three hits
	}{
		{"1e308", 1e308, 3 * wire.MaxCompileSeconds},
		{"infinity", math.Inf(1), 3 * wire.MaxCompileSeconds},
		{"NaN", math.NaN(), 0},
		{"negative", -5, 0},
		{"ordinary", 2.5, 7.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openMem(t)
			s.RecordWrite(Write{Namespace: "team-a", Backend: "xla", Key: key(1), CompileSeconds: tt.seconds})
			for range 3 {
				s.RecordLookup(Lookup{Namespace: "team-a", Backend: "xla", Run: "r1", Key: key(1), Name: "jit_f", Hit: true, CompileSeconds: tt.seconds})
			}
			snap := s.Snapshot(SnapshotOptions{})
			if got := snap.Totals.CompileSecondsSaved; got != tt.want {
				t.Fatalf("totals saved = %v, want %v", got, tt.want)
			}
			if len(snap.Runs) != 1 || snap.Runs[0].CompileSecondsSaved != tt.want {
				t.Fatalf("runs = %+v", snap.Runs)
			}
			if len(snap.TopEntries) != 1 || snap.TopEntries[0].SecondsSaved != tt.want || snap.TopEntries[0].CompileSeconds != tt.want/3 {
				t.Fatalf("top entries = %+v", snap.TopEntries)
			}
		})
	}
}

func TestCountersAddSaturates(t *testing.T) {
	tests := []struct {
		name    string
		a, b, w int64
	}{
		{"ordinary", 1, 2, 3},
		{"to the top", math.MaxInt64 - 1, 1, math.MaxInt64},
		{"past the top", math.MaxInt64 - 1, 5, math.MaxInt64},
		{"at the top", math.MaxInt64, math.MaxInt64, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Counters{Hits: tt.a, SavedMicros: tt.a}
			c.add(&Counters{Hits: tt.b, SavedMicros: tt.b})
			if c.Hits != tt.w || c.SavedMicros != tt.w {
				t.Fatalf("got %d and %d, want %d", c.Hits, c.SavedMicros, tt.w)
			}
		})
	}
}

// TestNegativeCountersOnDiskLoadAsZero loads a database that the bug left
// with negative compile seconds saved: they load as 0, the rest intact.
func TestNegativeCountersOnDiskLoadAsZero(t *testing.T) {
	dir := t.TempDir()
	bad := Counters{Lookups: 3, Hits: 3, SavedMicros: math.MinInt64}
	minute := time.Now().Unix() / 60
	writeRaw(t, dir, map[string]any{
		string(bucketKey(pMinute, minute, "team-a", "xla")): bad,
		pTotals + "team-a\x00xla":                           bad,
		pRun + "r1":                                         Run{Run: "r1", Namespaces: []string{"team-a"}, FirstSeen: time.Now(), LastSeen: time.Now(), Counters: bad},
		pEntry + "team-a\x00" + hexKey(key(1)): Entry{Namespace: "team-a", Key: hexKey(key(1)), Backend: "xla",
			CompileSeconds: 1e308, Hits: 3, SavedMicros: math.MinInt64},
	})
	var logs bytes.Buffer
	s, err := Open(Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "team-a") || !strings.Contains(l, "xla") {
		t.Errorf("no warning naming the namespace and backend: %s", l)
	}
	snap := s.Snapshot(SnapshotOptions{})
	if tot := snap.Totals; tot.CompileSecondsSaved != 0 || tot.Hits != 3 || tot.Lookups != 3 {
		t.Fatalf("totals = %+v", tot)
	}
	if len(snap.Runs) != 1 || snap.Runs[0].CompileSecondsSaved != 0 || snap.Runs[0].Hits != 3 {
		t.Fatalf("runs = %+v", snap.Runs)
	}
	if len(snap.TopEntries) != 1 || snap.TopEntries[0].SecondsSaved != 0 || snap.TopEntries[0].CompileSeconds != wire.MaxCompileSeconds {
		t.Fatalf("top entries = %+v", snap.TopEntries)
	}
	ser, err := s.Series("", time.Now().Add(-time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range ser.Total.SecondsSaved {
		if v < 0 {
			t.Fatalf("series point %d saved %v", i, v)
		}
	}
	// New hits add to 0, not to the wrapped value.
	s.RecordLookup(Lookup{Namespace: "team-a", Backend: "xla", Hit: true, CompileSeconds: 2})
	if got := s.Snapshot(SnapshotOptions{}).Totals.CompileSecondsSaved; got != 2 {
		t.Fatalf("saved after a new hit = %v", got)
	}
}

// TestPartialHitSavesNoCompile is issue 12's bug 6 (stats part): a 304 and
// a 10-byte Range request each credited a whole compile saved.
func TestPartialHitSavesNoCompile(t *testing.T) {
	tests := []struct {
		name    string
		partial []bool // one hit of key(1) each
		bytes   int64  // BytesOut
		saved   float64
	}{
		{"full hit", []bool{false}, 1000, 40},
		{"range or 304", []bool{true}, 10, 0},
		{"full then partial", []bool{false, true}, 1010, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openMem(t)
			s.RecordWrite(Write{Namespace: "team-a", Backend: "xla", Key: key(1)})
			for _, p := range tt.partial {
				n := int64(1000)
				if p {
					n = 10
				}
				s.RecordLookup(Lookup{Namespace: "team-a", Backend: "xla", Run: "r1", Key: key(1), Hit: true, Partial: p, Bytes: n, CompileSeconds: 40})
			}
			snap := s.Snapshot(SnapshotOptions{})
			hits := int64(len(tt.partial))
			if tot := snap.Totals; tot.Hits != hits || tot.Lookups != hits || tot.BytesOut != tt.bytes || tot.CompileSecondsSaved != tt.saved {
				t.Fatalf("totals = %+v", tot)
			}
			if r := snap.Runs; len(r) != 1 || r[0].Hits != hits || r[0].CompileSecondsSaved != tt.saved {
				t.Fatalf("runs = %+v", r)
			}
			if e := snap.TopEntries; len(e) != 1 || e[0].Hits != hits || e[0].SecondsSaved != tt.saved {
				t.Fatalf("top entries = %+v", e)
			}
		})
	}
}

// TestWaitHitSavesOnlyWhatItDidNotWait: a hit of GET ?wait= saved its
// client the entry's compile seconds minus the time it waited for them,
// never less than nothing; the wait hit counts either way.
func TestWaitHitSavesOnlyWhatItDidNotWait(t *testing.T) {
	tests := []struct {
		name           string
		waited         bool
		compile, waitS float64
		want           float64
	}{
		{"plain hit", false, 10, 0, 10},
		{"answered at once", true, 10, 0, 10},
		{"waited most of the compile", true, 10, 8.5, 1.5},
		{"waited longer than the compile", true, 10, 12, 0},
		{"bad wait time counts as none", true, 10, math.NaN(), 10},
		{"negative wait counts as none", true, 10, -3, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openMem(t)
			s.RecordLookup(Lookup{Namespace: "team-a", Backend: "xla", Run: "r1", Key: key(1), Name: "jit_f", Hit: true,
				CompileSeconds: tt.compile, Waited: tt.waited, WaitSeconds: tt.waitS})
			snap := s.Snapshot(SnapshotOptions{})
			if got := snap.Totals.CompileSecondsSaved; got != tt.want {
				t.Fatalf("totals saved = %v, want %v", got, tt.want)
			}
			if len(snap.Runs) != 1 || snap.Runs[0].CompileSecondsSaved != tt.want {
				t.Fatalf("runs = %+v", snap.Runs)
			}
			if len(snap.TopEntries) != 1 || snap.TopEntries[0].SecondsSaved != tt.want || snap.TopEntries[0].CompileSeconds != tt.compile {
				t.Fatalf("top entries = %+v", snap.TopEntries)
			}
			if tt.waited && snap.Totals.WaitHits != 1 {
				t.Fatalf("wait hits = %d, want 1", snap.Totals.WaitHits)
			}
		})
	}
}
