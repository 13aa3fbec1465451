package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestEntryTooLargeSaysWhatToDo: an upload over --max-entry-size, its size
// declared or found while streaming, is refused with a message that names
// the limit and the flag that sets it, so that the user who sees it in a
// training job's log knows what to ask the operator for. Before, it said
// only "the maximum entry size is N bytes" (or "the body is over the
// N-byte limit").
func TestEntryTooLargeSaysWhatToDo(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{MaxEntryBytes: 1000})
	for _, tc := range []struct {
		name    string
		chunked bool
	}{
		{"declared", false},
		{"chunked", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			var body []byte
			if tc.chunked {
				resp = srv.Do(http.MethodPut, srv.EntryURL("default", keyOf("too large "+tc.name)), io.MultiReader(newPayload(1, 3000)))
				body = apitest.ReadAll(t, resp)
			} else {
				resp, body = put(t, srv, "default", keyOf("too large "+tc.name), 1, 3000)
			}
			var e wire.ErrorBody
			if resp.StatusCode != http.StatusRequestEntityTooLarge || json.Unmarshal(body, &e) != nil || e.Error.Code != "entry_too_large" {
				t.Fatalf("%d %s, want 413 entry_too_large", resp.StatusCode, body)
			}
			for _, want := range []string{"1000 bytes", "--max-entry-size"} {
				if !strings.Contains(e.Error.Message, want) {
					t.Errorf("message %q does not say %q", e.Error.Message, want)
				}
			}
		})
	}
}
