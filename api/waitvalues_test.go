package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/stats/statstest"
)

// TestWaitRefusesBadValues: a ?wait= that is empty, not a number of
// seconds or a duration, or outside (0, 300 s] is refused with 400
// bad_wait, and the message names the accepted range with its unit and a
// value to send. An empty ?wait= was read as absent: a templated
// `?wait=$WAIT` with WAIT unset got a plain lookup that never waited, and
// `?wait=&waited=0` was told that it lacked ?wait=.
func TestWaitRefusesBadValues(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	entry := srv.URL + "/v1/default/entries/" + testKey(71)
	const rangeText = "seconds above 0 and at most 300 (e.g. wait=60)"
	tests := []struct {
		name, query, says string
	}{
		{"empty", "?wait=", "?wait= is empty"},
		{"empty, with waited", "?wait=&waited=0", "?wait= is empty"},
		{"not a number", "?wait=soon", `"soon" is not a duration`},
		{"NaN", "?wait=NaN", "is not a duration"},
		{"zero", "?wait=0", "?wait=0 is out of range"},
		{"negative", "?wait=-5", "out of range"},
		{"negative duration", "?wait=-5s", "out of range"},
		{"over 300 s", "?wait=301", "out of range"},
		{"over 5 m", "?wait=5m1s", "out of range"},
		{"infinite", "?wait=Inf", "out of range"},
		{"overflows a duration", "?wait=1e10", "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, code, msg := rawGet(t, entry+tt.query)
			if st != 400 || code != "bad_wait" || !strings.Contains(msg, tt.says) || !strings.Contains(msg, rangeText) {
				t.Fatalf("%s: %d %s %q, want 400 bad_wait saying %q and %q", tt.query, st, code, msg, tt.says, rangeText)
			}
		})
	}
	for _, q := range []string{"?wait=300", "?wait=5m", "?wait=0.5", "?wait=1ms"} {
		if st, code, msg := rawGet(t, entry+q); st != 404 || code != "not_found" {
			t.Errorf("%s without a lease: %d %s %q, want 404 not_found at once", q, st, code, msg)
		}
	}
}

// TestBareWaitCounts holds the server to README's counting of a bare
// ?wait= (no waited: curl, or a client from before waited): one that
// answers 404 at once counts its own miss, one that parked and ended
// empty counts none, and a hit, at once or after parking, is a hit and a
// wait hit.
func TestBareWaitCounts(t *testing.T) {
	tests := []struct {
		name string
		// present: the entry is stored first; lease: a holder holds its
		// lease through the wait.
		present, lease bool
		status         int
		code           string
		totals         [4]int64 // lookups, hits, misses, wait hits
	}{
		{"no lease, no entry", false, false, 404, "not_found", [4]int64{1, 0, 1, 0}},
		{"the entry is there", true, false, 200, "", [4]int64{1, 1, 0, 1}},
		{"parked, the wait runs out", false, true, 404, "wait_timeout", [4]int64{0, 0, 0, 0}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := statstest.Start(t, nil)
			c := newClient(t, srv.URL, "")
			key := testKey(72 + i)
			if tt.present {
				putEntry(t, c, "default", key, []byte("executable"), "prog")
			}
			if tt.lease {
				if _, ok, err := c.AcquireLease(context.Background(), "default", key, "holder", time.Minute); err != nil || !ok {
					t.Fatalf("acquire: granted %v, %v", ok, err)
				}
			}
			st, code, _ := rawGet(t, srv.URL+"/v1/default/entries/"+key+"?wait=0.3")
			if st != tt.status || code != tt.code {
				t.Fatalf("bare wait: %d %s, want %d %s", st, code, tt.status, tt.code)
			}
			s := getStats(t, srv.URL+"/v1/stats").Totals
			if got := [4]int64{s.Lookups, s.Hits, s.Misses, s.WaitHits}; got != tt.totals {
				t.Errorf("totals: lookups, hits, misses, wait hits = %v, want %v", got, tt.totals)
			}
		})
	}
}
