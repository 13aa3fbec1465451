package resp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"net/http"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store/storetest"
	"github.com/cachesvc/cachesvc/wire"
)

// stats fetches GET /v1/stats.
func (e *env) stats() wire.StatsResponse {
	e.t.Helper()
	resp := e.api.Do(http.MethodGet, e.api.URL+"/v1/stats", nil)
	var s wire.StatsResponse
	if err := json.Unmarshal(apitest.ReadAll(e.t, resp), &s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// TestCountedOnce: every GET and MGET lookup and every SET is reported once
// to the server's statistics (backend pt2, the display name and compile
// time from the value) and its metrics; EXISTS reads no entry and is not a
// lookup.
func TestCountedOnce(t *testing.T) {
	e := start(t, options{})
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: e.addr})
	defer c.Close()
	k1, k2 := torchKey("counted"), "triton:3c1f0a9e7b2d:triton_poi_fused_add_0.json"
	must := func(err error) {
		t.Helper()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
	}
	must(c.Get(ctx, k1).Err())                              // miss
	must(c.Set(ctx, k1, torchValue("QUJD", 2500), 0).Err()) // created, 2.5 s
	must(c.Set(ctx, k1, torchValue("QUJD", 2500), 0).Err()) // exists
	must(c.Set(ctx, k1, torchValue("WFla", 2400), 0).Err()) // conflict
	must(c.Set(ctx, k2, `{"child_paths": {}}`, 0).Err())    // created, no compile time
	must(c.Get(ctx, k1).Err())                              // hit
	must(c.MGet(ctx, k1, k2, torchKey("absent")).Err())     // hit, hit, miss
	must(c.Exists(ctx, k1, torchKey("absent2")).Err())      // not a lookup
	s := e.stats()
	tot := s.Totals
	if tot.Lookups != 5 || tot.Hits != 3 || tot.Misses != 2 || tot.Writes != 2 {
		t.Errorf("totals: %+v; want 5 lookups, 3 hits, 2 misses, 2 writes", tot)
	}
	if math.Abs(tot.CompileSecondsSaved-5) > 1e-9 {
		t.Errorf("compile seconds saved %v, want 5 (two hits of a 2.5 s compile)", tot.CompileSecondsSaved)
	}
	if len(s.Backends) != 1 || s.Backends[0].Backend != "pt2" || s.Backends[0].Hits != 3 {
		t.Errorf("backends: %+v; want pt2 with 3 hits", s.Backends)
	}
	if len(s.Namespaces) != 1 || s.Namespaces[0].Namespace != "default" {
		t.Errorf("namespaces: %+v", s.Namespaces)
	}
	for series, want := range map[string]float64{
		`cachesvc_lookups_by_route_total{route="resp",result="hit"}`:  3,
		`cachesvc_lookups_by_route_total{route="resp",result="miss"}`: 2,
		`cachesvc_puts_total{result="created"}`:                       2,
		`cachesvc_puts_total{result="exists"}`:                        1,
		`cachesvc_puts_total{result="conflict"}`:                      1,
		`cachesvc_resp_commands_total{command="get",result="ok"}`:     2,
		`cachesvc_resp_commands_total{command="set",result="ok"}`:     4,
		`cachesvc_resp_commands_total{command="mget",result="ok"}`:    1,
		`cachesvc_resp_commands_total{command="exists",result="ok"}`:  1,
		`cachesvc_resp_commands_total{command="hello",result="ok"}`:   1,
		`cachesvc_resp_connections_total`:                             1,
		`cachesvc_resp_connections`:                                   1,
	} {
		if got := e.metric(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// The entry is the HTTP API's too: the same bytes, under the pt2 key.
	key := pt2Key(t, e, k1)
	resp := e.api.Do(http.MethodGet, e.api.EntryURL("default", key), nil)
	if body := string(apitest.ReadAll(t, resp)); resp.StatusCode != 200 || body != torchValue("QUJD", 2500) {
		t.Errorf("HTTP GET of the entry: %d %q", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Compile-Seconds"); got != "2.5" {
		t.Errorf("X-Compile-Seconds %q, want 2.5", got)
	}
}

// pt2Key asks the HTTP API for the server key of a Redis key.
func pt2Key(t *testing.T, e *env, redisKey string) string {
	t.Helper()
	sig, _ := json.Marshal(map[string]string{"backend": "pt2", "key": redisKey})
	resp := e.api.Do(http.MethodPost, e.api.URL+"/v1/default/keys", bytes.NewReader(sig))
	var kr wire.KeyResponse
	if err := json.Unmarshal(apitest.ReadAll(t, resp), &kr); err != nil {
		t.Fatal(err)
	}
	if _, err := cachekey.ParseKey(kr.Key); err != nil {
		t.Fatalf("key %q: %v", kr.Key, err)
	}
	return kr.Key
}

// TestConcurrent: many clients writing and reading the same and different
// keys at once (run with -race) see first-writer-wins values, and every
// command is counted once.
func TestConcurrent(t *testing.T) {
	e := start(t, options{})
	ctx := context.Background()
	const clients, rounds = 12, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Go(func() {
			c := redis.NewClient(&redis.Options{Addr: e.addr, PoolSize: 2})
			defer c.Close()
			shared := torchKey("shared")
			for j := range rounds {
				own := torchKey(fmt.Sprintf("c%dr%d", i, j))
				if err := c.Set(ctx, own, fmt.Sprintf("v%d-%d", i, j), 0).Err(); err != nil {
					errs <- err
					return
				}
				if err := c.Set(ctx, shared, fmt.Sprintf("writer-%d", i), 0).Err(); err != nil {
					errs <- err
					return
				}
				vs, err := c.MGet(ctx, own, shared).Result()
				if err != nil || vs[0] != fmt.Sprintf("v%d-%d", i, j) || vs[1] == nil {
					errs <- fmt.Errorf("MGET: %v, %v", vs, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := e.stats()
	if want := int64(clients * rounds * 2); s.Totals.Hits != want || s.Totals.Writes != clients*rounds+1 {
		t.Errorf("hits %d (want %d), writes %d (want %d)", s.Totals.Hits, want, s.Totals.Writes, clients*rounds+1)
	}
	if got := e.metric(`cachesvc_resp_commands_total{command="set",result="ok"}`); got != clients*rounds*2 {
		t.Errorf("SETs counted %v, want %d", got, clients*rounds*2)
	}
}

// TestCorruptEntryCountsNoHit: a GET of an entry whose first chunk fails
// its checksum gets no value (the connection is closed mid-reply, so the
// client never takes half a value for one) and counts no hit; the entry is
// quarantined, and the client's next GET is a miss, counted once. Before,
// the hit was counted before the value was read: one compile's lookups
// counted a hit that saved nothing and a miss.
func TestCorruptEntryCountsNoHit(t *testing.T) {
	dir := t.TempDir()
	key := torchKey("corrupt")
	data := make([]byte, 3<<20)
	rand.New(rand.NewSource(7)).Read(data)
	value := torchValue(base64.StdEncoding.EncodeToString(data), 2500)
	ctx := context.Background()
	first := start(t, options{dir: dir})
	c := redis.NewClient(&redis.Options{Addr: first.addr})
	if err := c.Set(ctx, key, value, 0).Err(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	first.api.Close()
	if _, err := storetest.FlipInValueLog(dir, []byte(value[100:164])); err != nil {
		t.Fatal(err)
	}
	e := start(t, options{dir: dir})
	c = redis.NewClient(&redis.Options{Addr: e.addr, MaxRetries: -1})
	defer c.Close()
	hits, misses := `cachesvc_lookups_by_route_total{route="resp",result="hit"}`, `cachesvc_lookups_by_route_total{route="resp",result="miss"}`
	for _, step := range []struct {
		name         string
		failed       bool // the GET fails (no value); else it is a miss (nil)
		hits, misses float64
	}{
		{"the corrupt read", true, 0, 0},
		{"the next GET", false, 0, 1},
	} {
		err := c.Get(ctx, key).Err()
		if step.failed && (err == nil || errors.Is(err, redis.Nil)) {
			t.Fatalf("%s: %v, want a failed GET", step.name, err)
		}
		if !step.failed && !errors.Is(err, redis.Nil) {
			t.Fatalf("%s: %v, want a miss (nil)", step.name, err)
		}
		if h, m := e.metric(hits), e.metric(misses); h != step.hits || m != step.misses {
			t.Errorf("%s: resp hits %v, misses %v; want %v, %v", step.name, h, m, step.hits, step.misses)
		}
	}
}
