package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/stats/statstest"
)

// rawGet sends GET base+path and returns the status and the error code of
// a JSON error answer ("" for none).
func rawGet(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(body, &doc)
	return resp.StatusCode, doc.Error.Code, doc.Error.Message
}

// TestWaitContinuationCountsAsOneWait: a client whose long poll a proxy cut
// (its read timeout shorter than ?wait=) asks again with ?waited= the time
// already spent. The wait's first request counted the miss; the
// continuation counts no second one, and a hit at its end saves the
// compile time minus the whole wait, not just the last slice.
func TestWaitContinuationCountsAsOneWait(t *testing.T) {
	tests := []struct {
		name string
		// write: the holder writes the entry during the continuation;
		// otherwise it releases its lease without it between the slices.
		write bool
		// status is the continuation's answer; totals are lookups, hits,
		// misses, wait hits afterwards.
		status int
		totals [4]int64
		// most is the most the wait may have saved of a 100 s compile.
		most float64
	}{
		{"the entry comes in a later slice", true, 200, [4]int64{2, 1, 1, 1}, 100 - 40},
		{"the lease ends between slices", false, 404, [4]int64{1, 0, 1, 0}, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := statstest.Start(t, nil)
			c := newClient(t, srv.URL, "")
			ctx := context.Background()
			key := testKey(60 + i)
			entry := srv.URL + "/v1/default/entries/" + key
			if st, _, _ := rawGet(t, entry); st != 404 {
				t.Fatalf("first lookup: %d, want a 404 miss", st)
			}
			if _, ok, err := c.AcquireLease(ctx, "default", key, "holder", time.Minute); err != nil || !ok {
				t.Fatalf("acquire: granted %v, %v", ok, err)
			}
			if st, code, _ := rawGet(t, entry+"?wait=0.2s"); st != 404 || code != "wait_timeout" {
				t.Fatalf("first slice: %d %s, want 404 wait_timeout", st, code)
			}
			if !tt.write {
				if err := c.ReleaseLease(ctx, "default", key, "holder"); err != nil {
					t.Fatal(err)
				}
			}
			got := make(chan int, 1)
			go func() {
				st, _, _ := rawGet(t, entry+"?wait=30s&waited=40")
				got <- st
			}()
			if tt.write {
				for {
					if _, w := srv.API.LeaseCounts(); w == 1 {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				body := []byte("executable")
				if _, err := c.Put(ctx, "default", key, bytes.NewReader(body), client.PutOptions{Size: int64(len(body)), CompileSeconds: 100}); err != nil {
					t.Fatal(err)
				}
			}
			if st := <-got; st != tt.status {
				t.Fatalf("continuation: %d, want %d", st, tt.status)
			}
			s := getStats(t, srv.URL+"/v1/stats").Totals
			if got := [4]int64{s.Lookups, s.Hits, s.Misses, s.WaitHits}; got != tt.totals {
				t.Errorf("totals: lookups, hits, misses, wait hits = %v, want %v", got, tt.totals)
			}
			if s.CompileSecondsSaved < 0 || s.CompileSecondsSaved > tt.most {
				t.Errorf("saved %v s of a 100 s compile after a 40 s wait, want 0 to %v", s.CompileSecondsSaved, tt.most)
			}
		})
	}
}

// TestWaitedRefusesBadValues: ?waited= that is not a number of seconds, is
// out of range or comes without ?wait= is refused with 400 bad_waited and a
// message that quotes it and says what to send.
func TestWaitedRefusesBadValues(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	entry := srv.URL + "/v1/default/entries/" + testKey(70)
	tests := []struct {
		name, query, says string
	}{
		{"not a number", "?wait=5s&waited=soon", `"soon" is not a duration`},
		{"negative", "?wait=5s&waited=-3", "at least 0"},
		{"negative duration", "?wait=5s&waited=-3s", "at least 0"},
		{"NaN", "?wait=5s&waited=NaN", "not a duration"},
		{"infinite", "?wait=5s&waited=Inf", "at most 24h0m0s"},
		{"over a day", "?wait=5s&waited=86401", "at most 24h0m0s"},
		// The example names a query to send: waited="10" in it (the value
		// quoted as the message quotes it) was no query a client could send.
		{"without wait", "?waited=10", `needs ?wait= too: send e.g. ?wait=50s&waited=10,`},
		{"bad, without wait", "?waited=soon", `needs ?wait= too: send e.g. ?wait=50s&waited=120,`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, code, msg := rawGet(t, entry+tt.query)
			if st != 400 || code != "bad_waited" || !strings.Contains(msg, tt.says) {
				t.Fatalf("%s: %d %s %q, want 400 bad_waited saying %q", tt.query, st, code, msg, tt.says)
			}
		})
	}
	if st, code, _ := rawGet(t, entry+"?wait=0.1s&waited=12.5"); st != 404 || code != "not_found" {
		t.Errorf("a valid continuation without a lease: %d %s, want 404 not_found", st, code)
	}
}
