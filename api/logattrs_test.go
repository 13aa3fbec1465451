package api_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// failingPuts is a store whose every Put fails with an error the API does
// not know (a 500).
type failingPuts struct{ api.Store }

func (failingPuts) Put(context.Context, string, cachekey.Key, io.Reader, store.PutOptions) (store.PutResult, error) {
	return store.PutResult{}, errors.New("disk on fire")
}

// logLines decodes the JSON log lines whose msg is msg.
func logLines(t *testing.T, logs, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestLogsNameTheEntry: an import that the store fails on one entry logs
// that entry's namespace and key, and the 500 it answers is logged with
// the namespace but no key (the route has none: not the zero key).
func TestLogsNameTheEntry(t *testing.T) {
	st, err := store.Open(store.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var logs syncBuffer
	a, err := api.New(api.Config{Store: failingPuts{st}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	key := entryKey("import fails")
	data := []byte("executable")
	sum := sha256.Sum256(data)
	var body bytes.Buffer
	tw := tar.NewWriter(&body)
	if err := tw.WriteHeader(&tar.Header{Name: key, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX,
		PAXRecords: map[string]string{wire.PAXSHA256: hex.EncodeToString(sum[:])}}); err != nil {
		t.Fatal(err)
	}
	tw.Write(data)
	tw.Close()
	req := httptest.NewRequest("POST", "/v1/team-a/import", &body)
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := a.App().Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Fatalf("import with a failing store = %d, want 500", resp.StatusCode)
	}
	stopped := logLines(t, logs.String(), "import stopped")
	if len(stopped) != 1 || stopped[0]["namespace"] != "team-a" || stopped[0]["key"] != key {
		t.Errorf("import stopped logs %v, want one naming namespace team-a and key %s", stopped, key)
	}
	failed := logLines(t, logs.String(), "request failed")
	if len(failed) != 1 || failed[0]["namespace"] != "team-a" {
		t.Fatalf("request failed logs %v, want one naming namespace team-a", failed)
	}
	if k, ok := failed[0]["key"]; ok {
		t.Errorf("request failed on a route without a key logs key %v", k)
	}
}
