package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
)

// TestMemoOtherCodeMetric: a server restarted over the memo file of
// another build of a plugin (empty and emptyfix are both empty@1) keys
// with its own code and counts the result it did not use in
// cachesvc_signature_memo_other_code_total{plugin}.
func TestMemoOtherCodeMetric(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "signature-memo")
	wasm := func(name string) string { return filepath.Join("..", "plugins", "testdata", name+".wasm") }
	sig := []byte(`{"backend":"empty","program":"g"}`)
	old := keyingtest.Keyer(t, plugins.Config{}, keying.Config{MemoFile: file}, wasm("empty"))
	oldRes, err := old.Key(ctx, sig)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}

	k := keyingtest.Keyer(t, plugins.Config{}, keying.Config{MemoFile: file}, wasm("emptyfix"))
	s := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Keyer = k }})
	const metric = `cachesvc_signature_memo_other_code_total{plugin="empty@1"}`
	tests := []struct {
		name       string
		wantMetric string // the line, "" for none
	}{
		{"first key request", metric + " 1"},
		{"second key request (a memo hit of the new code)", metric + " 1"},
	}
	for _, tt := range tests {
		resp, body := post(t, s, "/v1/default/keys", sig)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", tt.name, resp.StatusCode, body)
		}
		var got struct {
			Key string `json:"key"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Key == oldRes.Key.String() {
			t.Fatalf("%s: the server answered the old build's key %s from its memo file", tt.name, got.Key)
		}
		m := string(apitest.ReadAll(t, s.Do(http.MethodGet, s.URL+"/metrics", nil)))
		if !strings.Contains(m, tt.wantMetric+"\n") {
			t.Fatalf("%s: /metrics lacks %q:\n%s", tt.name, tt.wantMetric, grepLines(m, "signature_memo"))
		}
	}
}
