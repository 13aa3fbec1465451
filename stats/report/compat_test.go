package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// TestRenderAnswersOfOtherVersions decodes saved GET /v1/stats answers
// (testdata/) of servers older and newer than this build, all of the same
// traffic (team-a and team-b: two entries of 19 B each, a hit and a miss
// per entry): format 1 from the build before store_scope (a namespace's
// answer with the whole store beside its share), format 1 from the build
// whose namespace answer already held only its own usage, format 2,
// formats 2, 3 and 4 of a fleet replica (the store's tiers), and a made-up
// format 99 with fields this build does not know.
// Each is read as its server meant it: the whole store is called the whole
// server's only when it is, and a newer format is said to be newer.
// (The namespace answers' time series are cut from the files.)
func TestRenderAnswersOfOtherVersions(t *testing.T) {
	tests := []struct {
		file, ns string
		want     []string
		not      []string
	}{
		{"ns-format1-whole-store.json", "team-a",
			[]string{"Store       38 B in 2 entries (no quota)", "Server      76 B in 4 entries (no limit)", "(all namespaces)"},
			[]string{"Note "}},
		{"ns-format1-own-store.json", "team-a",
			[]string{"Store       38 B in 2 entries (no quota)"},
			[]string{"Server ", "all namespaces", "Note "}},
		{"ns-format2.json", "team-a",
			[]string{"Store       38 B in 2 entries (no quota)"},
			[]string{"Server ", "all namespaces", "Note "}},
		{"all-format1.json", "",
			[]string{"Lookups     6  (hits 4, misses 2)", "Store       76 B in 4 entries (no limit)", "team-b"},
			[]string{"Note "}},
		{"all-format2.json", "",
			[]string{"Lookups     6  (hits 4, misses 2)", "Store       76 B in 4 entries (no limit)", "team-b"},
			[]string{"Note "}},
		{"all-format99.json", "",
			[]string{"Note        the server (v9.0.0) writes stats format 99, newer than this cachesvc's 4", "Lookups     6  (hits 4, misses 2)"},
			nil},
		// A fleet replica whose bucket holds 5 MiB and whose hot tier 3 MiB
		// of its 3 MiB --max-size: format 2 sent the bucket's bytes with the
		// hot tier's limit (which read as "167% used").
		{"fleet-format2.json", "",
			[]string{"Store       5.0 MiB in 5 entries in the shared tier (this older server does not report its hot tier's usage; hot tier limit 3.0 MiB)"},
			[]string{"% used", "Note "}},
		{"fleet-format3.json", "",
			[]string{"Shared tier 5.0 MiB in 5 entries (no limit), the fleet's as this replica last counted them", "Hot tier    3.0 MiB in 3 entries on this replica (limit 3.0 MiB, 100% used); 2 evictions"},
			[]string{"167%", "Note "}},
		// Format 4 moved the hot tier's evictions (and disk bytes and
		// namespaces) under store.hot; the outer ones are the shared
		// tier's 0. (fleet-format3.json moved into that shape; api
		// TestStatsFleetStoreShape checks a real replica's.)
		{"fleet-format4.json", "",
			[]string{"Shared tier 5.0 MiB in 5 entries (no limit), the fleet's as this replica last counted them", "Hot tier    3.0 MiB in 3 entries on this replica (limit 3.0 MiB, 100% used); 2 evictions"},
			[]string{"167%", "Note "}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r := readAnswer(t, tt.file)
			var out strings.Builder
			if err := Render(&out, r, Options{Server: "http://h:8080", Namespace: tt.ns, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out.String(), n) {
					t.Errorf("output has %q:\n%s", n, out.String())
				}
			}
		})
	}
}

// TestRenderMixedFleet decodes GET /v1/stats?scope=fleet answers saved
// from a fleet in a rolling upgrade (README "Upgrading and rolling back"):
// replica a ran this build (stats format 4, labelled v1.0.0-newf268911),
// b and c ran 557bbaf (format 3, v0.9.0-old557bbaf), on one versitygw
// bucket under traffic; one file is b's answer, the other a's. Either is
// read as meant: each replica's hot tier from its heartbeat (557bbaf's
// has no tier), the answering replica's own lines from its format, and no
// note that the format is newer.
func TestRenderMixedFleet(t *testing.T) {
	rows := []string{
		"a        ok      just now   v1.0.0-newf268911  40.3 MiB in 1,401 entries  reachable",
		"b        ok      7 s ago    v0.9.0-old557bbaf  38.7 MiB in 1,334 entries  reachable",
		"c        ok      9 s ago    v0.9.0-old557bbaf  37.8 MiB in 1,317 entries  reachable",
	}
	tests := []struct {
		file, asked string
		want        []string
	}{
		{"fleet-scope-format3-mixed.json", "http://127.0.0.1:17082", []string{
			"Shared tier 18.7 MiB in 786 entries (no limit), the fleet's as http://127.0.0.1:17082 last counted them",
			"Hot tier    41.6 MiB in 1,440 entries on http://127.0.0.1:17082, the replica asked (no limit); 0 evictions",
			"Replicas    3 of 3 healthy",
		}},
		{"fleet-scope-format4-mixed.json", "http://127.0.0.1:17081", []string{
			"Shared tier 52.1 MiB in 2,171 entries (no limit), the fleet's as http://127.0.0.1:17081 last counted them",
			"Hot tier    41.6 MiB in 1,448 entries on http://127.0.0.1:17081, the replica asked (no limit); 0 evictions",
			"Replicas    3 of 3 healthy",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r := readAnswer(t, tt.file)
			var out strings.Builder
			if err := Render(&out, r, Options{Server: tt.asked, Now: r.Fleet.GeneratedAt}); err != nil {
				t.Fatal(err)
			}
			for _, w := range append(tt.want, rows...) {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if strings.Contains(out.String(), "Note ") {
				t.Errorf("output has a format note:\n%s", out.String())
			}
		})
	}
}

// readAnswer decodes the saved GET /v1/stats answer testdata/file.
func readAnswer(t *testing.T, file string) *wire.StatsResponse {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var r wire.StatsResponse
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
	return &r
}
