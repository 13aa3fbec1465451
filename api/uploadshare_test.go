package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestUploadPlacesKeepAQuarterForOthers: one token holding upload places
// with slow bodies (at --min-transfer-rate a 4 GiB entry takes 18 hours,
// and an endless chunk extension never ends) could take every place, and
// every other writer got 503 too_many_uploads. A token holding half the
// places or more may not take the last quarter: the next one goes to
// another writer.
func TestUploadPlacesKeepAQuarterForOthers(t *testing.T) {
	srv := secureServer(t, nil, func(c *api.Config) { c.Limits.MaxConcurrentUploads = 4 })
	for i := range 3 {
		pr, pw := io.Pipe()
		t.Cleanup(func() { pw.CloseWithError(io.ErrUnexpectedEOF) })
		go func() {
			req, _ := http.NewRequest("PUT", srv.EntryURL("default", entryKey("slow-"+string(rune('a'+i)))), pr)
			req.Header.Set("Authorization", "Bearer "+tokWriter.Secret)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		pw.Write([]byte("first part "))
	}
	for deadline := time.Now().Add(10 * time.Second); uploadsInProgress(t, srv) != 3; {
		if time.Now().After(deadline) {
			t.Fatalf("%d uploads in progress, want 3", uploadsInProgress(t, srv))
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp := srv.Do("PUT", srv.EntryURL("default", entryKey("hog's fourth")), strings.NewReader("x"), bearer(tokWriter)...)
	b := apitest.ReadAll(t, resp)
	if resp.StatusCode != 503 || errCode(t, b) != "too_many_uploads" || !strings.Contains(string(b), "ci-writer") {
		t.Fatalf("the same token's fourth upload: %d %s; want 503 too_many_uploads naming it", resp.StatusCode, b)
	}
	resp = srv.Do("PUT", srv.EntryURL("default", entryKey("another writer")), strings.NewReader("x"), bearer(tokAdmin)...)
	if b := apitest.ReadAll(t, resp); resp.StatusCode != 201 {
		t.Fatalf("another token's upload: %d %s; want 201", resp.StatusCode, b)
	}
}
