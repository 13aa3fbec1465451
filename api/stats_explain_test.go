package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/wire"
)

const explainModule = `module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
`

func xlaSignature(mut func(map[string]any)) []byte {
	sig := map[string]any{
		"backend":         "xla",
		"module":          explainModule,
		"platform":        "cpu",
		"jaxlib_version":  "0.4.38",
		"xla_flags":       []string{"--xla_cpu_enable_fast_math=false"},
		"compile_options": "opts-v1",
	}
	if mut != nil {
		mut(sig)
	}
	b, _ := json.Marshal(sig)
	return b
}

// startXLA starts a server with the built-in plugins and returns it, its
// plugin host, and a function that looks a signature up in team-a (run
// sweep-9), with the 404 body decoded.
func startXLA(t *testing.T) (*statstest.Server, *plugins.Host, func([]byte) (int, wire.LookupMiss)) {
	pm := api.NewPluginMetrics()
	keyer, h := builtinKeyer(t, pm.Observe)
	srv := statstest.StartWith(t, nil, func(c *api.Config) { c.Keyer = keyer })
	srv.Registry.MustRegister(pm)
	lookup := func(sig []byte) (int, wire.LookupMiss) {
		t.Helper()
		resp := srv.Do(http.MethodPost, srv.URL+"/v1/team-a/lookup", bytes.NewReader(sig), "Content-Type", "application/json", "X-Cachesvc-Run", "sweep-9")
		body := apitest.ReadAll(t, resp)
		var m wire.LookupMiss
		if resp.StatusCode == http.StatusNotFound {
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("decode 404 %s: %v", body, err)
			}
		}
		return resp.StatusCode, m
	}
	return srv, h, lookup
}

// TestLookupMissExplanations runs real lookups through the xla plugin
// (wasm): after one entry is stored, a lookup that differs only in XLA flags,
// jaxlib version, platform or module misses with a 404 that names that
// component, and the misses are kept and counted by reason.
func TestLookupMissExplanations(t *testing.T) {
	srv, h, lookup := startXLA(t)

	// First compile: nothing to compare with.
	code, miss := lookup(xlaSignature(nil))
	if code != http.StatusNotFound || miss.Explanation.Reason != "no_entries" || miss.Key == "" {
		t.Fatalf("first lookup: %d %+v", code, miss)
	}
	// The trainer compiles and stores it; the PUT recalls the components.
	resp := srv.Do(http.MethodPut, srv.EntryURL("team-a", miss.Key), strings.NewReader("executable"), "X-Compile-Seconds", "12")
	apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}
	if code, _ := lookup(xlaSignature(nil)); code != http.StatusOK {
		t.Fatalf("same signature: %d, want a hit", code)
	}

	tests := []struct {
		name, reason, label string
		mut                 func(map[string]any)
		want, have          string // shown values; empty for digests
	}{
		{"xla flags", "xla_flags", "XLA flags differ", func(s map[string]any) { s["xla_flags"] = []string{"--xla_cpu_enable_fast_math=true"} },
			"--xla_cpu_enable_fast_math=true", "--xla_cpu_enable_fast_math=false"},
		{"jaxlib version", "jaxlib_version", "jaxlib version differs", func(s map[string]any) { s["jaxlib_version"] = "0.4.36" }, "0.4.36", "0.4.38"},
		{"platform", "platform", "platform differs", func(s map[string]any) { s["platform"] = "cuda" }, "cuda", "cpu"},
		{"module", "module", "module differs", func(s map[string]any) {
			s["module"] = strings.Replace(explainModule, "stablehlo.add", "stablehlo.multiply", 1)
		}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, miss := lookup(xlaSignature(tt.mut))
			ex := miss.Explanation
			if code != http.StatusNotFound || ex.Reason != tt.reason || len(ex.Nearest) == 0 {
				t.Fatalf("lookup: %d reason %q (%s)", code, ex.Reason, ex.Summary)
			}
			if !strings.Contains(ex.Summary, tt.label) && !strings.Contains(ex.Summary, strings.ToUpper(tt.label[:1])+tt.label[1:]) {
				t.Errorf("summary %q does not say %q", ex.Summary, tt.label)
			}
			var d *struct {
				want, have string
				short      bool
			}
			for _, df := range ex.Nearest[0].Diffs {
				if df.Component == tt.reason {
					d = &struct {
						want, have string
						short      bool
					}{df.Want, df.Have, df.Short}
				}
			}
			if d == nil {
				t.Fatalf("no diff for %s: %+v", tt.reason, ex.Nearest[0].Diffs)
			}
			if tt.want != "" && (!d.short || d.want != tt.want || d.have != tt.have) {
				t.Errorf("diff = %+v, want values %q / %q", *d, tt.want, tt.have)
			}
			if tt.want == "" && (d.short || !strings.HasPrefix(d.want, "xxh64:") || d.want == d.have) {
				t.Errorf("diff = %+v, want distinct digests", *d)
			}
		})
	}

	resp = srv.Do(http.MethodGet, srv.URL+"/v1/team-a/misses", nil)
	var rep stats.MissReport
	if err := json.Unmarshal(apitest.ReadAll(t, resp), &rep); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, rc := range rep.ByReason {
		counts[rc.Reason] = rc.Count
	}
	// The first miss came before team-a held an entry; on a server without
	// tokens its caller may write there, so it admitted team-a and is in
	// its report too (a read-only token's would count under _other).
	for _, r := range []string{"no_entries", "xla_flags", "jaxlib_version", "platform", "module"} {
		if counts[r] != 1 {
			t.Errorf("misses by reason %q = %d, want 1 (all: %+v)", r, counts[r], rep.ByReason)
		}
	}
	if rep.Total != 5 || len(rep.Recent) != 5 || rep.Recent[0].Explanation.Reason != "module" || rep.Recent[0].Run != "sweep-9" {
		t.Errorf("recent misses: total %d, %d recent, newest %+v", rep.Total, len(rep.Recent), rep.Recent[0])
	}
	if got := srv.Metric(`cachesvc_miss_explanations_total{reason="xla_flags"}`); got != 1 {
		t.Errorf("cachesvc_miss_explanations_total{reason=xla_flags} = %v", got)
	}
	// Every distinct signature was one call into the xla plugin.
	xlaID := ""
	for _, i := range h.Plugins() {
		for _, b := range i.Backends {
			if b == "xla" {
				xlaID = i.ID
			}
		}
	}
	if got := srv.Metric(`cachesvc_plugin_call_duration_seconds_count{plugin="` + xlaID + `"}`); got < 5 {
		t.Errorf("plugin %q calls observed = %v, want at least 5", xlaID, got)
	}
	// After a restart the index is seeded from the store's entries: misses
	// are still explained. (Seeding runs in the background; poll for it.)
	srv.Restart()
	flags := func(s map[string]any) { s["xla_flags"] = []string{"--xla_cpu_enable_fast_math=true"} }
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, miss := lookup(xlaSignature(flags))
		if code == http.StatusNotFound && miss.Explanation.Reason == "xla_flags" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after restart: %d reason %q", code, miss.Explanation.Reason)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := getStats(t, srv.URL+"/v1/team-a/stats")
	if st.Totals.Lookups < 6 || st.Totals.Hits != 1 || st.Totals.CompileSecondsSaved != 12 || len(st.RecentMisses) < 5 {
		t.Errorf("team-a stats: %+v, %d recent misses", st.Totals, len(st.RecentMisses))
	}
}

// TestDeletedEntriesExplainNoMiss: a deleted entry leaves the comparison
// index, so a later miss is not explained by an entry that is gone.
func TestDeletedEntriesExplainNoMiss(t *testing.T) {
	srv, _, lookup := startXLA(t)
	put := func(mut func(map[string]any)) string {
		t.Helper()
		_, miss := lookup(xlaSignature(mut))
		resp := srv.Do(http.MethodPut, srv.EntryURL("team-a", miss.Key), strings.NewReader("executable"))
		apitest.ReadAll(t, resp)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT: %d", resp.StatusCode)
		}
		return miss.Key
	}
	old := put(nil)
	newer := put(func(s map[string]any) { s["platform"] = "cuda"; s["jaxlib_version"] = "0.5.0" })
	flags := func(s map[string]any) { s["xla_flags"] = []string{"--xla_cpu_enable_fast_math=true"} }
	tests := []struct {
		name    string
		del     string // the entry deleted before the lookup
		reason  string
		nearest string
	}{
		{"both stored", "", "xla_flags", old},
		{"nearest deleted", old, "jaxlib_version+platform+xla_flags", newer},
		{"all deleted", newer, "no_entries", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.del != "" {
				resp := srv.Do(http.MethodDelete, srv.EntryURL("team-a", tt.del), nil)
				apitest.ReadAll(t, resp)
				if resp.StatusCode != http.StatusNoContent {
					t.Fatalf("DELETE: %d", resp.StatusCode)
				}
			}
			code, miss := lookup(xlaSignature(flags))
			ex := miss.Explanation
			if code != http.StatusNotFound || ex.Reason != tt.reason {
				t.Fatalf("lookup: %d reason %q (%s)", code, ex.Reason, ex.Summary)
			}
			if tt.nearest != "" && (len(ex.Nearest) == 0 || ex.Nearest[0].Key != tt.nearest) {
				t.Fatalf("nearest = %+v, want %s first", ex.Nearest, tt.nearest)
			}
			if got := srv.Metric(`cachesvc_explain_index_entries`); got != float64(ex.Compared) {
				t.Errorf("cachesvc_explain_index_entries = %v, want %d", got, ex.Compared)
			}
		})
	}
}
