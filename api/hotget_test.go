package api_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestSmallGetFromMemory: the second GET of a small entry (served from the
// store's memory cache, sent without a copy) answers exactly like the first:
// body, status, entry headers, ranges; and a delete is seen at once.
func TestSmallGetFromMemory(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	key := keyOf("hot-small")
	put(t, srv, "default", key, 11, 4096)
	want, err := io.ReadAll(newPayload(11, 4096))
	if err != nil {
		t.Fatal(err)
	}
	url := srv.EntryURL("default", key)
	var first http.Header
	tests := []struct {
		name     string
		rng      string
		status   int
		from, to int // body is want[from:to]
	}{
		{"first GET (from Badger)", "", http.StatusOK, 0, 4096},
		{"second GET (from memory)", "", http.StatusOK, 0, 4096},
		{"range", "bytes=100-199", http.StatusPartialContent, 100, 200},
		{"suffix range", "bytes=-10", http.StatusPartialContent, 4086, 4096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.rng != "" {
				headers = []string{"Range", tc.rng}
			}
			resp := srv.Do(http.MethodGet, url, nil, headers...)
			body := apitest.ReadAll(t, resp)
			if resp.StatusCode != tc.status || !bytes.Equal(body, want[tc.from:tc.to]) {
				t.Fatalf("GET %q = %d, %d bytes; want %d, bytes %d-%d", tc.rng, resp.StatusCode, len(body), tc.status, tc.from, tc.to)
			}
			if first == nil {
				first = resp.Header
				return
			}
			for _, h := range []string{"ETag", wire.HeaderContentSHA256, wire.HeaderCreated, wire.HeaderCompileSeconds, "Content-Type"} {
				if got := resp.Header.Get(h); got != first.Get(h) || got == "" {
					t.Errorf("%s = %q, first GET had %q", h, got, first.Get(h))
				}
			}
		})
	}
	resp := srv.Do(http.MethodDelete, url, nil)
	apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE = %d", resp.StatusCode)
	}
	resp = srv.Do(http.MethodGet, url, nil)
	apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET after DELETE = %d, want 404", resp.StatusCode)
	}
}
