package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// stats returns GET path's body.
func statsOf(t *testing.T, srv *apitest.Server, path string) wire.StatsResponse {
	t.Helper()
	resp := srv.Do(http.MethodGet, srv.URL+path, nil)
	body := apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d: %s", path, resp.StatusCode, body)
	}
	var st wire.StatsResponse
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func findNS(nss []wire.NamespaceUsage, ns string) (wire.NamespaceUsage, bool) {
	for _, u := range nss {
		if u.Namespace == ns {
			return u, true
		}
	}
	return wire.NamespaceUsage{}, false
}

// TestQuotaOverHTTP runs a real server over real Badger with a quota on
// team-a: uploads past it evict team-a's least recently used entries only,
// an entry that can never fit gets 507 quota_exceeded naming the namespace
// and its quota, and the usage shows in /v1/stats, /v1/{ns}/stats and
// /metrics.
func TestQuotaOverHTTP(t *testing.T) {
	const size = 64 << 10
	srv := apitest.Start(t, apitest.Options{Store: func(c *store.Config) {
		c.Quotas = store.Quotas{Namespaces: map[string]store.Quota{"team-a": {MaxBytes: 4 * size, MaxIdle: 24 * time.Hour}}}
	}})
	for i := range 3 {
		if resp, body := put(t, srv, "team-b", keyOf(fmt.Sprint("b", i)), uint64(100+i), size); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT team-b = %d: %s", resp.StatusCode, body)
		}
	}
	for i := range 10 {
		if resp, body := put(t, srv, "team-a", keyOf(fmt.Sprint("a", i)), uint64(i), size); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT team-a %d = %d: %s", i, resp.StatusCode, body)
		}
		time.Sleep(2 * time.Millisecond)
	}
	for i := range 10 {
		want := http.StatusNotFound
		if i >= 6 {
			want = http.StatusOK
		}
		if status, _, _ := getDigest(t, srv, "team-a", keyOf(fmt.Sprint("a", i))); status != want {
			t.Errorf("GET team-a a%d = %d, want %d", i, status, want)
		}
	}
	for i := range 3 {
		if status, sum, _ := getDigest(t, srv, "team-b", keyOf(fmt.Sprint("b", i))); status != http.StatusOK || sum != digest(uint64(100+i), size) {
			t.Errorf("GET team-b b%d = %d (another namespace's entries must stay)", i, status)
		}
	}

	resp, body := put(t, srv, "team-a", keyOf("huge"), 99, 5*size)
	var eb struct {
		Error struct {
			Code    string            `json:"code"`
			Message string            `json:"message"`
			Details wire.QuotaDetails `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Fatalf("507 body %s: %v", body, err)
	}
	d := eb.Error.Details
	if resp.StatusCode != http.StatusInsufficientStorage || eb.Error.Code != "quota_exceeded" ||
		!strings.HasPrefix(eb.Error.Message, `Namespace "team-a" is at its quota of 256 KiB (max_bytes)`) ||
		!strings.Contains(eb.Error.Message, "raise max_bytes") ||
		d.Namespace != "team-a" || d.Limit != "max_bytes" || d.Quota != 4*size || d.Need != 5*size {
		t.Fatalf("PUT past the quota = %d %s", resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") != "" {
		t.Errorf("an entry that can never fit got Retry-After %q", resp.Header.Get("Retry-After"))
	}
	t.Logf("507: %s", eb.Error.Message)

	st := statsOf(t, srv, "/v1/stats")
	a, okA := findNS(st.Store.Namespaces, "team-a")
	b, okB := findNS(st.Store.Namespaces, "team-b")
	if !okA || !okB || a.Entries != 4 || a.Bytes != 4*size || a.MaxBytes != 4*size || a.MaxIdleSeconds != 86400 ||
		a.Evictions != 6 || a.EvictionsByReason["quota"] != 6 || b.Entries != 3 || b.Evictions != 0 || b.MaxBytes != 0 {
		t.Fatalf("/v1/stats namespaces %+v", st.Store.Namespaces)
	}
	if one := statsOf(t, srv, "/v1/team-a/stats").Store.Namespaces; len(one) != 1 || one[0].Namespace != "team-a" || one[0].Entries != a.Entries || one[0].MaxBytes != a.MaxBytes {
		t.Fatalf("/v1/team-a/stats namespaces %+v, want just team-a %+v", one, a)
	}
	if one := statsOf(t, srv, "/v1/team-c/stats").Store.Namespaces; len(one) != 1 || one[0].Namespace != "team-c" || one[0].Entries != 0 {
		t.Fatalf("/v1/team-c/stats namespaces %+v, want an empty team-c", one)
	}
	for series, want := range map[string]float64{
		`cachesvc_namespace_bytes{namespace="team-a"}`:                          4 * size,
		`cachesvc_namespace_entries{namespace="team-a"}`:                        4,
		`cachesvc_namespace_entries{namespace="team-b"}`:                        3,
		`cachesvc_namespace_quota_bytes{namespace="team-a"}`:                    4 * size,
		`cachesvc_namespace_quota_entries{namespace="team-a"}`:                  0,
		`cachesvc_namespace_evictions_total{namespace="team-a",reason="quota"}`: 6,
		`cachesvc_namespace_evictions_total{namespace="team-b",reason="quota"}`: 0,
		`cachesvc_evictions_total`:                                              6,
	} {
		if got := srv.Metric(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// TestExpiryOverHTTP runs a real server whose store expires idle entries
// of one namespace in the background: they disappear from GET and stats;
// another namespace keeps its entries.
func TestExpiryOverHTTP(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{Store: func(c *store.Config) {
		c.ExpiryInterval = 50 * time.Millisecond
		c.Quotas = store.Quotas{Namespaces: map[string]store.Quota{"brief": {MaxIdle: 300 * time.Millisecond}}}
	}})
	for _, ns := range []string{"brief", "lasting"} {
		if resp, body := put(t, srv, ns, keyOf("k"), 1, 1000); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT %s = %d: %s", ns, resp.StatusCode, body)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp := srv.Do(http.MethodHead, srv.EntryURL("brief", keyOf("k")), nil) // not an access
		status := resp.StatusCode
		resp.Body.Close()
		if status == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET of an entry idle past max_idle = %d", status)
		}
	}
	if status, _, _ := getDigest(t, srv, "lasting", keyOf("k")); status != http.StatusOK {
		t.Fatalf("GET lasting = %d, want 200", status)
	}
	st := statsOf(t, srv, "/v1/stats")
	if u, _ := findNS(st.Store.Namespaces, "brief"); u.Entries != 0 || u.Expirations != 1 || u.MaxIdleSeconds != 0.3 {
		t.Fatalf("brief usage %+v", u)
	}
	if got := srv.Metric(`cachesvc_namespace_evictions_total{namespace="brief",reason="idle"}`); got != 1 {
		t.Fatalf("idle expirations metric = %v", got)
	}
}
