package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestNamespaceStatsHideOtherNamespaces: GET /v1/{ns}/stats, which a reader
// of that namespace alone may ask for, says nothing that moves when another
// namespace stores an entry or takes a compile lease. Its whole-store
// numbers did (bytes, blobs and disk use of unique contents): a writer of
// one namespace could upload a guessed executable and learn, by whether the
// store's bytes grew, whether another namespace already held those very
// bytes; and the lease counts were the whole server's.
func TestNamespaceStatsHideOtherNamespaces(t *testing.T) {
	srv := secureServer(t, nil, nil)
	scoped := func() (store, counters string) {
		t.Helper()
		resp := srv.Do(http.MethodGet, srv.URL+"/v1/default/stats", nil, bearer(tokReader)...)
		body := apitest.ReadAll(t, resp)
		var doc struct {
			Store    json.RawMessage `json:"store"`
			Counters json.RawMessage `json:"store_counters"`
			Leases   json.RawMessage `json:"leases"`
		}
		if err := json.Unmarshal(body, &doc); err != nil || resp.StatusCode != 200 {
			t.Fatalf("stats = %d %s", resp.StatusCode, body)
		}
		return string(doc.Store), string(doc.Counters) + " leases " + string(doc.Leases)
	}
	store, counters := scoped()
	for i, body := range []string{strings.Repeat("other team's executable ", 100), strings.Repeat("x", 5000)} {
		resp := srv.Do(http.MethodPut, srv.EntryURL("other", entryKey(body)), strings.NewReader(body), bearer(tokAdmin)...)
		if b := apitest.ReadAll(t, resp); resp.StatusCode != 201 {
			t.Fatalf("PUT %d = %d %s", i, resp.StatusCode, b)
		}
	}
	resp := srv.Do(http.MethodPost, srv.URL+"/v1/other/leases/"+entryKey("compiling"), strings.NewReader(`{"holder":"h"}`), append(bearer(tokAdmin), "Content-Type", "application/json")...)
	if b := apitest.ReadAll(t, resp); resp.StatusCode != 201 {
		t.Fatalf("lease = %d %s", resp.StatusCode, b)
	}
	if s, c := scoped(); s != store || c != counters {
		t.Errorf("after another namespace's uploads, default's stats changed:\nstore %s\n   -> %s\nstore_counters, leases %s\n   -> %s", store, s, counters, c)
	}
}
