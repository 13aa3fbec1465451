package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/wire"
)

// TestServeRestartWithChangedPluginFile restarts a real `cachesvc serve`
// with another file under a plugin's name@version in --plugins (empty and
// emptyfix are both empty@1 and key differently): the signature memo
// file the old code filled must not answer. The digest-first lookup asks
// for the signature (428), the full one gets the new code's key, and
// /metrics and the log say a result of other code was dropped.
func TestServeRestartWithChangedPluginFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	data, plugdir := t.TempDir(), t.TempDir()
	install := func(name string) {
		b, err := os.ReadFile(filepath.Join("..", "..", "plugins", "testdata", name+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		writeAtomic(t, filepath.Join(plugdir, "empty.wasm"), b)
	}
	sig := []byte(`{"backend":"empty","program":"train_step"}`)
	digest := sha256.Sum256(sig)
	oldKey := keying.ComputeKey("empty@1", "empty", sig).String()
	newKey := keying.ComputeKey("empty@1", "empty", append([]byte("fixed:"), sig...)).String()
	keys := func(url string, body []byte, headers ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, url+"/v1/default/keys", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var got struct {
			Key string `json:"key"`
		}
		_ = json.Unmarshal(b, &got)
		return resp.StatusCode, got.Key
	}

	install("empty")
	p := startServer(t, bin, data, "--plugins", plugdir)
	waitReadyz(t, p.url)
	if code, key := keys(p.url, sig); code != 200 || key != oldKey {
		t.Fatalf("old code: %d key %s, want 200 %s", code, key, oldKey)
	}
	p.stop(t, 30*time.Second) // saves the memo file

	install("emptyfix")
	p = startServer(t, bin, data, "--plugins", plugdir)
	defer p.stop(t, 30*time.Second)
	waitReadyz(t, p.url)
	tests := []struct {
		name     string
		body     []byte
		headers  []string
		wantCode int
		wantKey  string
	}{
		{"digest first", nil, []string{wire.HeaderSignatureSHA256, hex.EncodeToString(digest[:])}, http.StatusPreconditionRequired, ""},
		{"full signature", sig, nil, 200, newKey},
		{"digest first again (the new code's result)", nil, []string{wire.HeaderSignatureSHA256, hex.EncodeToString(digest[:])}, 200, newKey},
	}
	for _, tt := range tests {
		if code, key := keys(p.url, tt.body, tt.headers...); code != tt.wantCode || key != tt.wantKey {
			t.Fatalf("%s after the restart: %d key %q; want %d %q (old code's key %s)", tt.name, code, key, tt.wantCode, tt.wantKey, oldKey)
		}
	}
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `cachesvc_signature_memo_other_code_total{plugin="empty@1"} 1`; !bytes.Contains(metrics, []byte(want+"\n")) {
		t.Errorf("/metrics lacks %s", want)
	}
	if log := p.stderr.String(); !strings.Contains(log, "another build of this plugin computed") || !strings.Contains(log, `"plugin":"empty@1"`) {
		t.Errorf("no warning about the memo's results of other code:\n%s", log)
	}
}
