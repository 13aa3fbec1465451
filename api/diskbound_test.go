package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// TestDiskBoundAnswers507RetryAfter pins the value log with an open reader
// (no GC can reclaim behind it), PUTs 1 MiB entries until the store's disk
// bound refuses, and checks the answer: 507 store_full with Retry-After and
// a message saying GC is catching up. Disk use shows in /v1/stats and
// /metrics beside the accounted size; after the reader closes, uploads
// succeed again.
func TestDiskBoundAnswers507RetryAfter(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{MaxBytes: 8 << 20, Store: func(c *store.Config) { c.DiskWait = 100 * time.Millisecond }})
	put(t, srv, "default", keyOf("pinned"), 0, 1<<20)
	k, err := cachekey.ParseKey(keyOf("pinned"))
	if err != nil {
		t.Fatal(err)
	}
	_, rc, err := srv.Store.Get(context.Background(), "default", k, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	var resp *http.Response
	var body []byte
	for i := 0; i < 100; i++ {
		resp, body = put(t, srv, "default", keyOf(fmt.Sprint(i)), uint64(i+1), 1<<20)
		if resp.StatusCode != http.StatusCreated {
			break
		}
	}
	if resp.StatusCode != http.StatusInsufficientStorage || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("PUT past the disk bound = %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	var eb wire.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Code != "store_full" {
		t.Fatalf("body %s (%v)", body, err)
	}
	t.Logf("507: %s", eb.Error.Message)

	var st wire.StatsResponse
	if err := json.Unmarshal(apitest.ReadAll(t, srv.Do(http.MethodGet, srv.URL+"/v1/stats", nil)), &st); err != nil {
		t.Fatal(err)
	}
	if st.Store.DiskBytes <= st.Store.Bytes {
		t.Errorf("stats store = %+v: disk_bytes should exceed bytes while GC is held back", st.Store)
	}
	if got := srv.Metric("cachesvc_store_disk_bytes"); got <= 0 {
		t.Errorf("cachesvc_store_disk_bytes = %v", got)
	}

	rc.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, body = put(t, srv, "default", keyOf("after"), 7, 1<<20)
		if resp.StatusCode == http.StatusCreated {
			break
		}
		if resp.StatusCode != http.StatusInsufficientStorage || time.Now().After(deadline) {
			t.Fatalf("PUT after the reader closed = %d: %s", resp.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
