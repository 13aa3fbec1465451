package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestAnonymousReadersTakeNoRunSlots: a request without a token, which the
// tokens file's anonymous rule lets read, counts its X-Cachesvc-Run under
// _other in the statistics: it takes none of the bounded run slots (before,
// anyone who could reach the server could fill them, or now cycle the real
// runs out) and adds nothing to a run a token holder's requests track. Its
// lookups still count in the totals.
func TestAnonymousReadersTakeNoRunSlots(t *testing.T) {
	srv := secureServer(t, nil, nil)
	none := authtest.Token{}
	for _, rq := range []struct {
		tok     authtest.Token
		ns, run string
	}{
		{tokReader, "public", "ci-77"},
		{tokReader, "default", "ci-78"},
		{none, "public", "made-up-1"},
		{none, "public", "made-up-2"},
		{none, "public", "ci-77"}, // a tracked run, by someone without a token
	} {
		headers := append([]string{wire.HeaderRun, rq.run}, bearer(rq.tok)...)
		resp := srv.Do(http.MethodGet, srv.EntryURL(rq.ns, entryKey(rq.ns+rq.run)), nil, headers...)
		if b := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("GET as %q in %s: %d %s", rq.tok.Name, rq.ns, resp.StatusCode, b)
		}
	}
	resp := srv.Do(http.MethodGet, srv.URL+"/v1/stats", nil, bearer(tokAdmin)...)
	body := apitest.ReadAll(t, resp)
	var st wire.StatsResponse
	if err := json.Unmarshal(body, &st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stats: %d %v %.300s", resp.StatusCode, err, body)
	}
	got := map[string]int64{}
	for _, r := range st.Runs {
		got[r.Run] = r.Lookups
	}
	want := map[string]int64{"ci-77": 1, "ci-78": 1, "_other": 3}
	if fmt.Sprint(got) != fmt.Sprint(want) || st.Totals.Lookups != 5 {
		t.Errorf("runs' lookups %v (totals %d), want %v (5)", got, st.Totals.Lookups, want)
	}
	metrics := string(apitest.ReadAll(t, srv.Do(http.MethodGet, srv.URL+"/metrics", nil, bearer(tokAdmin)...)))
	for _, line := range []string{"cachesvc_stats_runs 2\n", "cachesvc_stats_run_evictions_total 0\n",
		"cachesvc_stats_unsaved_samples_dropped_total 0\n"} {
		if !strings.Contains(metrics, line) {
			t.Errorf("/metrics has no line %q", line)
		}
	}
}
