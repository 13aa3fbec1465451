package api_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// TestHotEntryChangesSeenAtOnce: on a real server, once a small entry is
// served from memory (metadata and bytes), every request that changes it
// is seen by the very next GET and HEAD: eviction for the store bound,
// idle expiry, DELETE (the admin route), an overwrite (DELETE then PUT of
// other bytes), an import of other bytes after a DELETE, a quarantine, and
// a restore.
func TestHotEntryChangesSeenAtOnce(t *testing.T) {
	const ns = "default"
	const size = 4096
	post := func(t *testing.T, srv *apitest.Server, url string, body []byte, want int) {
		t.Helper()
		resp := srv.Do(http.MethodPost, url, bytes.NewReader(body), "Content-Type", "application/json")
		if b := apitest.ReadAll(t, resp); resp.StatusCode != want {
			t.Fatalf("POST %s = %d (%s), want %d", url, resp.StatusCode, b, want)
		}
	}
	del := func(t *testing.T, srv *apitest.Server, key string) {
		t.Helper()
		resp := srv.Do(http.MethodDelete, srv.EntryURL(ns, key), nil)
		if apitest.ReadAll(t, resp); resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
			t.Fatalf("DELETE = %d", resp.StatusCode)
		}
	}
	tests := []struct {
		name string
		opts apitest.Options
		// change changes the entry key and returns the seed of the bytes
		// a GET must then return, 0 for a 404.
		change func(t *testing.T, srv *apitest.Server, key string) uint64
	}{
		{"evicted for the store bound", apitest.Options{MaxBytes: 6 << 10}, func(t *testing.T, srv *apitest.Server, key string) uint64 {
			if resp, b := put(t, srv, ns, keyOf("newer"), 4, size); resp.StatusCode != http.StatusCreated {
				t.Fatalf("PUT = %d (%s)", resp.StatusCode, b)
			}
			return 0
		}},
		{"idle expiry", apitest.Options{Store: func(c *store.Config) {
			c.Quotas = store.Quotas{Default: store.Quota{MaxIdle: time.Second}}
			c.ExpiryInterval = 20 * time.Millisecond
		}}, func(t *testing.T, srv *apitest.Server, key string) uint64 {
			// Wait (without reading it) until the expiry loop removed it.
			k, err := cachekey.ParseKey(key)
			if err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := srv.Store.Stat(context.Background(), ns, k); errors.Is(err, store.ErrNotFound) {
					return 0
				}
				if time.Now().After(deadline) {
					t.Fatal("the idle entry was not expired within 30 s")
				}
			}
		}},
		{"DELETE", apitest.Options{}, func(t *testing.T, srv *apitest.Server, key string) uint64 {
			del(t, srv, key)
			return 0
		}},
		{"DELETE, then PUT of other bytes", apitest.Options{}, func(t *testing.T, srv *apitest.Server, key string) uint64 {
			del(t, srv, key)
			if resp, b := put(t, srv, ns, key, 2, size); resp.StatusCode != http.StatusCreated {
				t.Fatalf("PUT = %d (%s)", resp.StatusCode, b)
			}
			return 2
		}},
		{"DELETE, then import of other bytes", apitest.Options{}, func(t *testing.T, srv *apitest.Server, key string) uint64 {
			other := apitest.Start(t, apitest.Options{})
			put(t, other, ns, key, 3, size)
			resp := other.Do(http.MethodGet, other.URL+"/v1/"+ns+"/export", nil)
			tarball := apitest.ReadAll(t, resp)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("export = %d (%s)", resp.StatusCode, tarball)
			}
			del(t, srv, key)
			post(t, srv, srv.URL+"/v1/"+ns+"/import", tarball, http.StatusOK)
			return 3
		}},
		{"quarantine", apitest.Options{}, func(t *testing.T, srv *apitest.Server, key string) uint64 {
			post(t, srv, srv.EntryURL(ns, key)+"/quarantine", []byte(`{"reason":"test"}`), http.StatusOK)
			return 0
		}},
		{"quarantine, then restore", apitest.Options{}, func(t *testing.T, srv *apitest.Server, key string) uint64 {
			post(t, srv, srv.EntryURL(ns, key)+"/quarantine", []byte(`{"reason":"test"}`), http.StatusOK)
			resp := srv.Do(http.MethodGet, srv.EntryURL(ns, key), nil)
			if apitest.ReadAll(t, resp); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("GET while quarantined = %d, want 404", resp.StatusCode)
			}
			post(t, srv, srv.EntryURL(ns, key)+"/restore", nil, http.StatusOK)
			return 1
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := apitest.Start(t, tc.opts)
			key := keyOf("hot-" + tc.name)
			url := srv.EntryURL(ns, key)
			put(t, srv, ns, key, 1, size)
			for range 3 { // the second and third from memory
				if status, sum, _ := getDigest(t, srv, ns, key); status != http.StatusOK || sum != digest(1, size) {
					t.Fatalf("GET = %d, sha256 %s", status, sum)
				}
			}
			seed := tc.change(t, srv, key)
			head := srv.Do(http.MethodHead, url, nil)
			apitest.ReadAll(t, head)
			status, sum, h := getDigest(t, srv, ns, key)
			if seed == 0 {
				if status != http.StatusNotFound || head.StatusCode != http.StatusNotFound {
					t.Fatalf("after the change: GET %d, HEAD %d; want 404", status, head.StatusCode)
				}
				return
			}
			want := digest(seed, size)
			if status != http.StatusOK || sum != want || h.Get(wire.HeaderContentSHA256) != want ||
				head.StatusCode != http.StatusOK || head.Header.Get(wire.HeaderContentSHA256) != want {
				t.Fatalf("after the change: GET %d, body %s, header %s; HEAD %d, header %s; want the bytes of %s",
					status, sum, h.Get(wire.HeaderContentSHA256), head.StatusCode, head.Header.Get(wire.HeaderContentSHA256), want)
			}
		})
	}
}
