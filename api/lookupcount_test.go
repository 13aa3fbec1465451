package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/store/storetest"
	"github.com/cachesvc/cachesvc/wire"
)

// routeCounts reads cachesvc_lookups_by_route_total for the HTTP routes:
// the one count per lookup that the statistics and /metrics both get.
func routeCounts(t *testing.T, s *apitest.Server) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, route := range []string{"entries", "lookup", "batch"} {
		for _, result := range []string{"hit", "miss"} {
			v := s.Metric(fmt.Sprintf(`cachesvc_lookups_by_route_total{result=%q,route=%q}`, result, route))
			if v < 0 {
				t.Fatalf("no cachesvc_lookups_by_route_total series for %s %s", route, result)
			}
			out[route+" "+result] = v
		}
	}
	return out
}

// TestEveryLookupCountedOnce sends each kind of read the README's Metrics
// and Sweeps sections define to a real server and checks the lookups it
// counts: one per GET of an entry (a 206 or 304 a partial hit, a Range on a
// missing entry one miss), none for HEAD and exists ("not counted as an
// access"), one per distinct key of a batch, none for a digest-first
// lookup answered 428 (the client then sends the signature, which counts
// once), none for a request refused as bad input.
func TestEveryLookupCountedOnce(t *testing.T) {
	s := digestServer(t, keying.Config{}, nil)
	present, absent, bad := keyOf("counted-present"), keyOf("counted-absent"), keyOf("counted-quarantined")
	body := strings.Repeat("e", 1000)
	resp := s.Do(http.MethodPut, s.EntryURL("default", present), strings.NewReader(body), wire.HeaderCompileSeconds, "10")
	apitest.ReadAll(t, resp)
	etag := resp.Header.Get("ETag")
	apitest.ReadAll(t, s.Do(http.MethodPut, s.EntryURL("default", bad), strings.NewReader("bad bytes")))
	resp = s.Do(http.MethodPost, s.EntryURL("default", bad)+"/quarantine", strings.NewReader(`{"reason":"checked by hand"}`))
	if b := apitest.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("quarantine: %d %s", resp.StatusCode, b)
	}
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_counted-1"}`)
	batch := func(keys ...string) []byte {
		b, _ := json.Marshal(map[string][]string{"keys": keys})
		return b
	}
	tests := []struct {
		name, method, path string
		body               []byte
		headers            []string
		status             int
		want               map[string]float64 // counts added, by "route result"
	}{
		{"GET hit", "GET", "/v1/default/entries/" + present, nil, nil, 200, map[string]float64{"entries hit": 1}},
		{"GET miss", "GET", "/v1/default/entries/" + absent, nil, nil, 404, map[string]float64{"entries miss": 1}},
		{"HEAD hit", "HEAD", "/v1/default/entries/" + present, nil, nil, 200, nil},
		{"HEAD miss", "HEAD", "/v1/default/entries/" + absent, nil, nil, 404, nil},
		{"HEAD with a wait", "HEAD", "/v1/default/entries/" + absent + "?wait=1s", nil, nil, 404, nil},
		{"Range hit", "GET", "/v1/default/entries/" + present, nil, []string{"Range", "bytes=0-9"}, 206, map[string]float64{"entries hit": 1}},
		{"Range miss", "GET", "/v1/default/entries/" + absent, nil, []string{"Range", "bytes=0-9"}, 404, map[string]float64{"entries miss": 1}},
		{"Range unsatisfiable", "GET", "/v1/default/entries/" + present, nil, []string{"Range", "bytes=5000-"}, 416, nil},
		{"304", "GET", "/v1/default/entries/" + present, nil, []string{"If-None-Match", etag}, 304, map[string]float64{"entries hit": 1}},
		{"If-None-Match changed", "GET", "/v1/default/entries/" + present, nil, []string{"If-None-Match", `"other"`}, 200, map[string]float64{"entries hit": 1}},
		{"bad wait", "GET", "/v1/default/entries/" + absent + "?wait=forever", nil, nil, 400, nil},
		{"GET quarantined: a miss", "GET", "/v1/default/entries/" + bad, nil, nil, 404, map[string]float64{"entries miss": 1}},
		{"HEAD quarantined", "HEAD", "/v1/default/entries/" + bad, nil, nil, 404, nil},
		{"batch with a quarantined key", "POST", "/v1/default/batch", batch(bad), nil, 200, map[string]float64{"batch miss": 1}},
		{"exists", "POST", "/v1/default/exists", batch(present, absent), nil, 200, nil},
		{"batch, a key twice", "POST", "/v1/default/batch", batch(present, absent, present), nil, 200, map[string]float64{"batch hit": 1, "batch miss": 1}},
		{"batch, a bad key", "POST", "/v1/default/batch", batch(present, "nope"), nil, 400, nil},
		{"digest unknown: 428", "POST", "/v1/default/lookup", nil, []string{wire.HeaderSignatureSHA256, sigDigest(sig)}, 428, nil},
		{"the signature after the 428", "POST", "/v1/default/lookup", sig, []string{wire.HeaderSignatureSHA256, sigDigest(sig)}, 404, map[string]float64{"lookup miss": 1}},
		{"digest known: a miss", "POST", "/v1/default/lookup", nil, []string{wire.HeaderSignatureSHA256, sigDigest(sig)}, 404, map[string]float64{"lookup miss": 1}},
		{"keys by digest", "POST", "/v1/default/keys", nil, []string{wire.HeaderSignatureSHA256, sigDigest(sig)}, 200, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := routeCounts(t, s)
			var rd io.Reader
			if tt.body != nil {
				rd = bytes.NewReader(tt.body)
			}
			resp := s.Do(tt.method, s.URL+tt.path, rd, tt.headers...)
			if b := apitest.ReadAll(t, resp); resp.StatusCode != tt.status {
				t.Fatalf("%s %s: %d %s, want %d", tt.method, tt.path, resp.StatusCode, b, tt.status)
			}
			after := routeCounts(t, s)
			for k, v := range after {
				if d := v - before[k]; d != tt.want[k] {
					t.Errorf("lookups %s: +%v, want +%v", k, d, tt.want[k])
				}
			}
		})
	}
}

// TestBrokenBatchCountsWhatItDelivered: a batch whose stream aborts (a
// corrupt chunk mid-member) counts the hits it delivered and no misses: the
// client never got missing.json, so it learned no miss and asks again.
// The retry counts the rest, so every key is counted once in all. Before,
// the misses were counted when the batch was planned, and the retry
// counted them a second time.
func TestBrokenBatchCountsWhatItDelivered(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	bad := make([]byte, 3<<20)
	rand.New(rand.NewSource(13)).Read(bad)
	good, corrupt, later, absent := testKey(91), testKey(92), testKey(93), testKey(94)
	putEntry(t, c, "default", good, []byte("good one"), "")
	putEntry(t, c, "default", corrupt, bad, "")
	putEntry(t, c, "default", later, []byte("good three"), "")
	srv.Close()
	if _, err := storetest.FlipInValueLog(srv.Dir, bad[2<<20+100:2<<20+164]); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	c = newClient(t, srv.URL, "")
	batch := func(keys ...string) (got, missing []string, err error) {
		missing, err = c.Batch(context.Background(), "default", keys, func(m client.Member, r io.Reader) error {
			if _, err := io.Copy(io.Discard, r); err != nil {
				return err
			}
			got = append(got, m.Key)
			return nil
		})
		return got, missing, err
	}
	tests := []struct {
		name    string
		keys    []string
		got     []string // members delivered
		missing []string // nil: the stream broke
		want    map[string]float64
	}{
		{"the stream breaks in the corrupt member", []string{good, corrupt, later, absent}, []string{good}, nil, map[string]float64{"batch hit": 1}},
		{"the retry of the rest", []string{corrupt, later, absent}, []string{later}, []string{corrupt, absent}, map[string]float64{"batch hit": 1, "batch miss": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := routeCounts(t, srv)
			got, missing, err := batch(tt.keys...)
			if tt.missing == nil && err == nil {
				t.Fatalf("batch over a corrupt entry completed: members %v, missing %v", got, missing)
			}
			if tt.missing != nil && (err != nil || !slices.Equal(missing, tt.missing)) {
				t.Fatalf("batch: missing %v, %v; want %v", missing, err, tt.missing)
			}
			if !slices.Equal(got, tt.got) {
				t.Fatalf("members delivered %v, want %v", got, tt.got)
			}
			after := routeCounts(t, srv)
			for k, v := range after {
				if d := v - before[k]; d != tt.want[k] {
					t.Errorf("lookups %s: +%v, want +%v", k, d, tt.want[k])
				}
			}
		})
	}
}

// TestCorruptEntryCountsNoHit: a GET or lookup of an entry with a chunk
// that fails its checksum counts no hit: the client got no entry, like any
// store failure that is not a miss. A bad first chunk answers 500
// integrity_failure before any byte of the body; a bad chunk past the first
// 64 KiB (the body streams) aborts the connection mid-body. Either way the
// entry is quarantined, and its next lookup is a miss, counted once.
// Before, the hit was counted before the body was read (first chunk), or
// once the stream was set up (a later chunk), so one compile's lookups
// counted a hit that saved nothing and a miss.
func TestCorruptEntryCountsNoHit(t *testing.T) {
	type route struct {
		name, method, key, path string
		body                    []byte
		route                   string
	}
	routes := func(i int) []route {
		name := fmt.Sprintf("jit_corrupt-%d", i)
		sig := []byte(`{"backend":"passthrough","kind":"jax","key":"` + name + `"}`)
		lookupKey := keying.ComputeKey("passthrough@1.0.0", "passthrough", []byte("jax\x00"+name)).String()
		return []route{
			{"GET", http.MethodGet, testKey(95 + i), "/v1/default/entries/" + testKey(95+i), nil, "entries"},
			{"lookup", http.MethodPost, lookupKey, "/v1/default/lookup", sig, "lookup"},
		}
	}
	const size = 3 << 20
	for i, where := range []struct {
		name   string
		at     int // the corrupt bytes' offset in the entry
		status int // the corrupt read's
	}{
		{"first chunk", 100, http.StatusInternalServerError},
		{"late chunk", 2<<20 + 100, http.StatusOK}, // aborted mid-body
	} {
		for j, tt := range routes(i) {
			t.Run(where.name+"/"+tt.name, func(t *testing.T) {
				s := digestServer(t, keying.Config{}, nil)
				bad := make([]byte, size)
				rand.New(rand.NewSource(int64(20 + 2*i + j))).Read(bad)
				if resp := s.Do(http.MethodPut, s.EntryURL("default", tt.key), bytes.NewReader(bad)); resp.StatusCode != 201 {
					t.Fatalf("put: %d %s", resp.StatusCode, apitest.ReadAll(t, resp))
				}
				s.Close()
				if _, err := storetest.FlipInValueLog(s.Dir, bad[where.at:where.at+64]); err != nil {
					t.Fatal(err)
				}
				s.Restart()
				for _, want := range []struct {
					status int
					counts map[string]float64
				}{
					{where.status, nil}, // the corrupt read
					{http.StatusNotFound, map[string]float64{tt.route + " miss": 1}}, // quarantined: a miss
				} {
					before := routeCounts(t, s)
					var body io.Reader
					if tt.body != nil {
						body = bytes.NewReader(tt.body)
					}
					resp := s.Do(tt.method, s.URL+tt.path, body)
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != want.status {
						t.Fatalf("%s %s: %d %.200s, want %d", tt.method, tt.path, resp.StatusCode, b, want.status)
					}
					if resp.StatusCode == http.StatusOK && (err == nil || len(b) == size) {
						t.Fatalf("%s %s: read %d bytes, %v; want the body cut short by an error", tt.method, tt.path, len(b), err)
					}
					after := routeCounts(t, s)
					for k, v := range after {
						if d := v - before[k]; d != want.counts[k] {
							t.Errorf("answer %d: lookups %s: +%v, want +%v", want.status, k, d, want.counts[k])
						}
					}
				}
			})
		}
	}
}
