package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestRunManifestsRecordOnlyRequestsWithARun: a request without
// X-Cachesvc-Run records no manifest (there is no run to name one by),
// with a token or without; a request without a token that names a run is
// recorded under that run, in the anonymous rule's namespaces, the only
// ones it reaches (README "Sweeps: batch fetch, run manifests"): its keys
// are what the next tokenless job of the sweep warms from.
func TestRunManifestsRecordOnlyRequestsWithARun(t *testing.T) {
	srv := secureServer(t, nil, nil)
	none := authtest.Token{}
	recorded := func() string {
		t.Helper()
		metrics := string(apitest.ReadAll(t, srv.Do(http.MethodGet, srv.URL+"/metrics", nil, bearer(tokAdmin)...)))
		for _, l := range strings.Split(metrics, "\n") {
			if strings.HasPrefix(l, "cachesvc_runs_recorded ") {
				return l
			}
		}
		t.Fatal("/metrics has no cachesvc_runs_recorded")
		return ""
	}
	for _, tok := range []authtest.Token{none, tokReader} {
		resp := srv.Do(http.MethodGet, srv.EntryURL("public", entryKey("no-run-"+tok.Name)), nil, bearer(tok)...)
		if b := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET as %q: %d %s", tok.Name, resp.StatusCode, b)
		}
	}
	if l := recorded(); l != "cachesvc_runs_recorded 0" {
		t.Errorf("after requests without a run: %q, want none recorded", l)
	}
	key := entryKey("anon-run")
	resp := srv.Do(http.MethodGet, srv.EntryURL("public", key), nil, wire.HeaderRun, "public-ci-1")
	if b := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET without a token, with a run: %d %s", resp.StatusCode, b)
	}
	resp = srv.Do(http.MethodGet, srv.URL+"/v1/public/runs/public-ci-1/manifest", nil)
	body := apitest.ReadAll(t, resp)
	var m wire.Manifest
	if err := json.Unmarshal(body, &m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("manifest without a token: %d %v %s", resp.StatusCode, err, body)
	}
	if len(m.Keys) != 1 || m.Keys[0].Key != key || !m.Keys[0].LookedUp {
		t.Errorf("manifest of the tokenless run = %+v, want its one lookup of %s", m, key)
	}
	if l := recorded(); l != "cachesvc_runs_recorded 1" {
		t.Errorf("after a tokenless run: %q, want 1 recorded", l)
	}
}
