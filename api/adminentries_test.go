package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// TestAdminEntriesBadQueries checks the status and code of every malformed
// listing, export and meta request, on a real server.
func TestAdminEntriesBadQueries(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	k := store.Key{1}
	if _, err := srv.Store.Put(context.Background(), "team", k, bytes.NewReader([]byte("x")), store.PutOptions{Size: 1}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/team/entries?limit=0", 400, "bad_limit"},
		{"/v1/team/entries?limit=1001", 400, "bad_limit"},
		{"/v1/team/entries?limit=ten", 400, "bad_limit"},
		{"/v1/team/entries?after=xyz", 400, "bad_cursor"},
		{"/v1/entries?after=" + k.String(), 400, "bad_cursor"},
		{"/v1/entries?after=Bad/" + k.String(), 400, "bad_cursor"},
		{"/v1/team/entries?older_than=yesterday", 400, "bad_filter"},
		{"/v1/team/entries?backend=XLA", 400, "bad_filter"}, // before: 200 and an empty list
		{"/v1/team/entries?run=%20x", 400, "bad_filter"},
		{"/v1/team/entries?idle_for=-5m", 400, "bad_filter"},
		{"/v1/team/entries?idle_for=0d", 400, "bad_filter"},
		{"/v1/team/entries?min_size=-1", 400, "bad_filter"},
		{"/v1/team/entries?max_size=1k", 400, "bad_filter"},
		{"/v1/team/entries?min_size=10&max_size=5", 400, "bad_filter"},
		{"/v1/Team/entries", 400, "bad_namespace"},
		{"/v1/team/export?older_than=x", 400, "bad_filter"},
		{"/v1/nobody/export", 404, "no_entries"},
		{"/v1/team/export?writer=nobody", 404, "no_entries"},
		{"/v1/team/entries/" + store.Key{2}.String() + "/meta", 404, "not_found"},
		{"/v1/team/entries/abc/meta", 400, "bad_key"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			resp := srv.Do(http.MethodGet, srv.URL+tc.path, nil)
			var body wire.ErrorBody
			if err := json.Unmarshal(apitest.ReadAll(t, resp), &body); err != nil || resp.StatusCode != tc.status || body.Error.Code != tc.code {
				t.Errorf("%d %q (%v), want %d %q", resp.StatusCode, body.Error.Code, err, tc.status, tc.code)
			}
			if !strings.HasSuffix(body.Error.Message, ".") {
				t.Errorf("message %q is not a sentence", body.Error.Message)
			}
		})
	}
	// A valid page of one entry, with its provenance.
	resp := srv.Do(http.MethodGet, srv.URL+"/v1/team/entries?max_size=1", nil)
	var page wire.EntryList
	if err := json.Unmarshal(apitest.ReadAll(t, resp), &page); err != nil || len(page.Entries) != 1 || page.Entries[0].Key != k.String() || page.Next != "" {
		t.Errorf("page %+v: %v", page, err)
	}
}
