package api_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/storetest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestUnwritableDataDir takes write access to a serving store's directory
// away (a chmod, a read-only remount) and sends 3,000 small uploads, more
// than fill its 1 MiB memtable, each followed by a GET of an entry stored
// before. Before, the uploads were stored (201) until Badger could not
// create its next memtable and ended the process. Now each is answered 503
// data_dir_unavailable with Retry-After, naming the directory and what to
// do, the GETs are served, and uploads resume once access is back. The
// refusals are logged as an outage's are: one WARN request line per
// interval, no "request failed" ERROR line each (the store's own ERROR
// line says it once).
func TestUnwritableDataDir(t *testing.T) {
	var logs syncBuffer
	srv := apitest.Start(t, apitest.Options{Store: func(c *store.Config) { c.MemTableSize = 1 << 20 },
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	srv.API.SetOutageLogEvery(time.Hour)
	const before = 50
	for i := range before {
		if resp, body := put(t, srv, "default", keyOf(fmt.Sprint("before ", i)), uint64(i), 512); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT: %d %s", resp.StatusCode, body)
		}
	}
	restore := storetest.MakeReadOnly(t, srv.Dir)
	stored := 0
	for i := range 3000 {
		resp, body := put(t, srv, "default", keyOf(fmt.Sprint("after ", i)), uint64(before+i), 512)
		var eb wire.ErrorBody
		_ = json.Unmarshal(body, &eb)
		if resp.StatusCode == http.StatusCreated {
			stored++ // into a memtable Badger cannot replace once full
		} else if resp.StatusCode != http.StatusServiceUnavailable || eb.Error.Code != "data_dir_unavailable" || resp.Header.Get("Retry-After") != "5" ||
			!strings.Contains(eb.Error.Message, "the data directory "+srv.Dir+" is gone or not writable") ||
			!strings.Contains(eb.Error.Message, "make the directory writable again") {
			t.Fatalf("PUT %d into a read-only data directory: %d Retry-After %q %s, want 503 data_dir_unavailable, Retry-After 5, naming %s and what to do",
				i, resp.StatusCode, resp.Header.Get("Retry-After"), body, srv.Dir)
		}
		if i == 0 && stored == 0 {
			t.Logf("503: %s", eb.Error.Message)
		}
		j := i % before
		if status, sum, _ := getDigest(t, srv, "default", keyOf(fmt.Sprint("before ", j))); status != http.StatusOK || sum != digest(uint64(j), 512) {
			t.Fatalf("GET of an entry stored before, with the directory read-only: %d", status)
		}
	}
	if stored > 0 {
		t.Errorf("%d of 3000 PUTs into a read-only data directory stored, want none", stored)
	}
	resp := srv.Do(http.MethodDelete, srv.EntryURL("default", keyOf("before 0")), nil)
	if body := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "data_dir_unavailable") ||
		!strings.Contains(string(body), "make the directory writable again") {
		t.Errorf("DELETE with the directory read-only: %d %s, want 503 data_dir_unavailable saying what to do", resp.StatusCode, body)
	}

	var warns, failed int
	for _, line := range strings.Split(logs.String(), "\n") {
		warns += strings.Count(line, `"level":"WARN","msg":"request"`) * strings.Count(line, `"code":"data_dir_unavailable"`)
		failed += strings.Count(line, `"msg":"request failed"`)
	}
	if warns != 1 || failed != 0 {
		t.Errorf("%d WARN request lines and %d \"request failed\" lines for 3,001 refused writes, want 1 and 0", warns, failed)
	}
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"the store cannot keep what it is sent`) {
		t.Errorf("no ERROR line from the store about its directory:\n%.2000s", logs.String())
	}

	restore()
	if resp, body := put(t, srv, "default", keyOf("back"), 1, 512); resp.StatusCode != http.StatusCreated {
		t.Errorf("PUT with the directory writable again: %d %s, want 201", resp.StatusCode, body)
	}
}
