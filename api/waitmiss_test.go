package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/stats/statstest"
)

// TestFailedWaitAfterMissCountsOneMiss: a client that missed (a plain GET,
// counted) and then long-polls marks every slice of the wait with
// ?waited=, the first with waited=0. When the wait ends without the entry
// (no lease, or the holder released it before the first slice parked),
// the server counts no second miss: lookups{miss} minus wait hits stays
// the compiles clients ran. A bare ?wait= (curl, a client that did not
// look first) is a lookup of its own and counts its miss once.
func TestFailedWaitAfterMissCountsOneMiss(t *testing.T) {
	tests := []struct {
		name string
		// plain: a plain GET misses first; lease: a holder takes the lease
		// and releases it before the wait.
		plain, lease bool
		query        string // the wait's request; "go client" uses client.Get
		status       int
		code         string
		misses       int64
	}{
		{"first slice waited=0, no lease", true, false, "?wait=0.2s&waited=0", 404, "not_found", 1},
		{"first slice waited=0s, lease released", true, true, "?wait=0.2s&waited=0s", 404, "not_found", 1},
		{"go client's long poll after its miss", true, false, "go client", 404, "not_found", 1},
		{"bare wait, nothing before it", false, false, "?wait=0.2s", 404, "not_found", 1},
		{"empty waited is refused", true, false, "?wait=0.2s&waited=", 400, "bad_waited", 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := statstest.Start(t, nil)
			c := newClient(t, srv.URL, "")
			ctx := context.Background()
			key := testKey(80 + i)
			entry := srv.URL + "/v1/default/entries/" + key
			if tt.plain {
				if st, _, _ := rawGet(t, entry); st != 404 {
					t.Fatalf("first lookup: %d, want a 404 miss", st)
				}
			}
			if tt.lease {
				if _, ok, err := c.AcquireLease(ctx, "default", key, "holder", time.Minute); err != nil || !ok {
					t.Fatalf("acquire: granted %v, %v", ok, err)
				}
				if err := c.ReleaseLease(ctx, "default", key, "holder"); err != nil {
					t.Fatal(err)
				}
			}
			var st int
			var code string
			if tt.query == "go client" {
				resp, err := c.Get(ctx, "default", key, 2*time.Second)
				var ce *client.Error
				if err == nil {
					resp.Body.Close()
					t.Fatal("the wait got an entry nobody wrote")
				}
				if e, ok := err.(*client.Error); ok {
					ce = e
				} else {
					t.Fatal(err)
				}
				st, code = ce.Status, ce.Code
			} else {
				st, code, _ = rawGet(t, entry+tt.query)
			}
			if st != tt.status || code != tt.code {
				t.Fatalf("the wait: %d %s, want %d %s", st, code, tt.status, tt.code)
			}
			s := getStats(t, srv.URL+"/v1/stats").Totals
			if got, want := [4]int64{s.Lookups, s.Hits, s.Misses, s.WaitHits}, [4]int64{tt.misses, 0, tt.misses, 0}; got != want {
				t.Errorf("totals: lookups, hits, misses, wait hits = %v, want %v", got, want)
			}
		})
	}
}
