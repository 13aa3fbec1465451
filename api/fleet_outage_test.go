package api_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/tiered"
	"github.com/cachesvc/cachesvc/store/tiered/tieredtest"
	"github.com/cachesvc/cachesvc/wire"
)

// replicaAPI returns a replica's API on a tiered store over a new bucket of
// srv (the S3 client retrying maxRetries times; 0: its default), and the
// store.
func replicaAPI(t *testing.T, srv *s3test.Server, maxRetries int) (*api.Server, *tiered.Store) {
	t.Helper()
	ts, _ := tieredtest.Open(t, srv, tieredtest.Options{MaxRetries: maxRetries, ProbeInterval: 20 * time.Millisecond})
	sharedState := func() wire.SharedTierState {
		st := ts.SharedState()
		return wire.SharedTierState{Configured: true, Reachable: st.Reachable, LastError: st.LastError}
	}
	a, err := api.New(api.Config{Store: ts, SharedTier: sharedState})
	if err != nil {
		t.Fatal(err)
	}
	return a, ts
}

// TestSharedTierOutageKeepsReplicaUsable runs a replica's API on a tiered
// store over a real S3 server (versitygw), stops the server, and checks
// what the README promises during the outage: /readyz says "degraded"
// but stays 200 (an S3 outage must not empty the load balancer), and
// compile leases fail open (201: the replica decides locally) instead of
// answering 503.
func TestSharedTierOutageKeepsReplicaUsable(t *testing.T) {
	srv := s3test.Start(t)
	a, ts := replicaAPI(t, srv, 0)
	const key = "6b86b273ff34fce19d6b804eff5a3f5747ada4ea22f1d49c01e52ddb7875b4b8"

	srv.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for ts.SharedState().Reachable {
		if time.Now().After(deadline) {
			t.Fatal("the shared tier still looks reachable 10 s after S3 stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, tc := range []struct {
		name, method, path, body string
		want                     int
		wantBody                 string
	}{
		{"readyz stays 200, degraded", "GET", "/readyz", "", 200, `"status":"degraded"`},
		{"lease fails open", "POST", "/v1/default/leases/" + key, `{"holder":"h1:1","ttl_s":60}`, 201, `"holder":"h1:1"`},
		{"a second holder on the same replica still waits", "POST", "/v1/default/leases/" + key, `{"holder":"h2:1","ttl_s":60}`, 409, `"lease_held"`},
		{"a cold GET is 503, not a miss", "GET", "/v1/default/entries/" + key, "", 503, `shared_tier_unavailable`},
		{"a PUT is 503, naming the entry once and the object", "PUT", "/v1/default/entries/" + key, "new bytes", 503,
			`"message":"Shared tier: put entry default/` + key + `: get entry record s3://`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			resp, err := a.App().Test(req, -1)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want || !strings.Contains(string(b), tc.wantBody) {
				t.Errorf("%s %s during the outage = %d %s, want %d with %s", tc.method, tc.path, resp.StatusCode, b, tc.want, tc.wantBody)
			}
			if n := strings.Count(string(b), key); n > 2 || strings.Contains(string(b), `\"http`) {
				// It read "Put entry default/KEY: shared tier: put entry
				// default/KEY: ... s3://.../KEY: ...: Put \"http://.../KEY\": ...".
				t.Errorf("%s %s: the message repeats the key (%d times): %s", tc.method, tc.path, n, b)
			}
			if ra := resp.Header.Get("Retry-After"); resp.StatusCode == 503 && ra == "" {
				t.Errorf("%s %s: a 503 without Retry-After", tc.method, tc.path)
			}
		})
	}
}

// TestSharedTierRefusingCredentials rotates the S3 server's secret under a
// running replica: the bucket answers, but refuses every request. That
// used to be 500 internal_error on every upload and cold read (even a
// plain miss) with /readyz "ready"; it is an outage the operator must fix,
// answered like one: 503 shared_tier_unavailable saying to check the
// credentials, /readyz degraded, hot entries still served, leases failing
// open (they were 500 too).
func TestSharedTierRefusingCredentials(t *testing.T) {
	srv := s3test.Start(t)
	a, _ := replicaAPI(t, srv, 1)
	do := func(method, path, body string) (int, string) {
		t.Helper()
		resp, err := a.App().Test(httptest.NewRequest(method, path, strings.NewReader(body)), -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	const hotKey = "6b86b273ff34fce19d6b804eff5a3f5747ada4ea22f1d49c01e52ddb7875b4b8"
	const coldKey = "d4735e3a265e16eee03f59718b9b5d03019c07d8b6c51f90da3a666eec13ab35"
	if code, body := do("PUT", "/v1/default/entries/"+hotKey, "hot bytes"); code != 201 {
		t.Fatalf("PUT before the rotation = %d %s", code, body)
	}

	srv.RotateSecret(t, "rotated-secret")
	for _, tc := range []struct {
		name, method, path, body string
		want                     int
		wantBody                 string
	}{
		{"an upload is 503 and says what to check", "PUT", "/v1/default/entries/" + coldKey, "new bytes", 503, `"shared_tier_unavailable"`},
		{"the message names the credentials", "PUT", "/v1/default/entries/" + coldKey, "new bytes", 503, `check the credentials`},
		{"a cold GET is 503", "GET", "/v1/default/entries/" + coldKey, "", 503, `"shared_tier_unavailable"`},
		{"a hot GET is served", "GET", "/v1/default/entries/" + hotKey, "", 200, "hot bytes"},
		{"a lease fails open", "POST", "/v1/default/leases/" + coldKey, `{"holder":"h1:1","ttl_s":60}`, 201, `"holder":"h1:1"`},
		{"readyz stays 200, degraded", "GET", "/readyz", "", 200, `"status":"degraded"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := do(tc.method, tc.path, tc.body); code != tc.want || !strings.Contains(body, tc.wantBody) {
				t.Errorf("%s %s with refused credentials = %d %s, want %d with %s", tc.method, tc.path, code, body, tc.want, tc.wantBody)
			}
		})
	}
}
