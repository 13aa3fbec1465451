package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestQuarantinedEntriesExplainNoMiss runs `cachesvc serve` and checks that
// a quarantined entry leaves the index that explains misses (a miss is not
// explained by an entry that is not served) and that a restore puts it back.
func TestQuarantinedEntriesExplainNoMiss(t *testing.T) {
	url := startServe(t)
	signature := func(flag string) []byte {
		b, _ := json.Marshal(map[string]any{
			"backend": "xla", "platform": "cpu", "jaxlib_version": "0.4.38", "xla_flags": []string{flag},
			"module": "module @jit_f {\n  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n" +
				"    %0 = stablehlo.add %arg0, %arg0 : tensor<4xf32>\n    return %0 : tensor<4xf32>\n  }\n}\n",
		})
		return b
	}
	// explain looks the signature with flag up and returns the miss's
	// reason and its nearest entry's key ("" when none).
	explain := func(flag string) (key, reason, nearest string) {
		t.Helper()
		code, m := postJSON(t, url+"/v1/team/lookup", signature(flag))
		if code != http.StatusNotFound {
			t.Fatalf("lookup: %d %v, want a miss", code, m)
		}
		ex, _ := m["explanation"].(map[string]any)
		if near, _ := ex["nearest"].([]any); len(near) > 0 {
			nearest, _ = near[0].(map[string]any)["key"].(string)
		}
		reason, _ = ex["reason"].(string)
		key, _ = m["key"].(string)
		if key == "" {
			t.Fatalf("lookup miss without a key: %v", m)
		}
		return key, reason, nearest
	}
	do := func(method, path, body string, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b.String(), want)
		}
	}
	stored, _, _ := explain("--xla_cpu_enable_fast_math=false")
	do(http.MethodPut, "/v1/team/entries/"+stored, "executable", http.StatusCreated)
	entry := "/v1/team/entries/" + stored

	for _, step := range []struct {
		name, method, path, body string
		status                   int
		reason, nearest          string
	}{
		{"stored", "", "", "", 0, "xla_flags", stored},
		{"quarantined", http.MethodPost, entry + "/quarantine", `{"reason":"bad build"}`, http.StatusOK, "no_entries", ""},
		{"restored", http.MethodPost, entry + "/restore", "", http.StatusOK, "xla_flags", stored},
	} {
		if step.method != "" {
			do(step.method, step.path, step.body, step.status)
		}
		_, reason, nearest := explain("--xla_cpu_enable_fast_math=true")
		if reason != step.reason || nearest != step.nearest {
			t.Fatalf("%s: a miss differing in one flag is explained as %q by %q, want %q by %q",
				step.name, reason, nearest, step.reason, step.nearest)
		}
	}
}
