package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/wire"
)

// TestMadeUpBackendsCountUnderOther: any reader could fill the 16
// per-backend statistics slots with made-up X-Cachesvc-Backend values on
// misses, leaving the real backends under _other. Misses now count under a
// backend only when the server knows it: a loaded plugin's (xla), or one an
// upload reported (pt2); the rest count under _other.
func TestMadeUpBackendsCountUnderOther(t *testing.T) {
	srv := startKeyServer(t, plugins.Config{}, keying.Config{})
	resp := srv.Do(http.MethodPut, srv.EntryURL("default", keyOf("written")), strings.NewReader("x"), "X-Cachesvc-Backend", "pt2")
	if b := apitest.ReadAll(t, resp); resp.StatusCode != 201 {
		t.Fatalf("put: %d %s", resp.StatusCode, b)
	}
	for i := 0; i < 20; i++ {
		apitest.ReadAll(t, srv.Do(http.MethodGet, srv.EntryURL("default", keyOf(fmt.Sprint("m", i))), nil, "X-Cachesvc-Backend", fmt.Sprint("made-up-", i)))
	}
	// The plugins' backends are admitted beside the start: wait for xla.
	want := map[string]int64{"_other": 20, "xla": 1, "pt2": 1}
	var got map[string]int64
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		apitest.ReadAll(t, srv.Do(http.MethodGet, srv.EntryURL("default", keyOf("xla miss")), nil, "X-Cachesvc-Backend", "xla"))
		apitest.ReadAll(t, srv.Do(http.MethodGet, srv.EntryURL("default", keyOf("pt2 miss")), nil, "X-Cachesvc-Backend", "pt2"))
		var st wire.StatsResponse
		if err := json.Unmarshal(apitest.ReadAll(t, srv.Do(http.MethodGet, srv.URL+"/v1/stats", nil)), &st); err != nil {
			t.Fatal(err)
		}
		got = map[string]int64{}
		for _, b := range st.Backends {
			got[b.Backend] = b.Misses
		}
		if got["xla"] > 0 || time.Now().After(deadline) {
			break
		}
		want["_other"]++ // an xla miss before the plugins were listed
	}
	if got["_other"] != want["_other"] || got["xla"] != 1 || got["pt2"] < 1 || len(got) != 3 {
		t.Fatalf("misses by backend %v, want %v (pt2 at least 1)", got, want)
	}
}
