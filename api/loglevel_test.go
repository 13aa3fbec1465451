package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
)

// logLevelsByCode returns, from JSON logs, the level and message of each
// line about a 5xx answer, by its error code.
func logLevelsByCode(t *testing.T, logs string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec struct {
			Level, Msg, Code string
			Status           int
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Status < 500 {
			continue
		}
		out[rec.Code] = append(out[rec.Code], rec.Level+" "+rec.Msg)
	}
	return out
}

// TestExpectedUnavailableLoggedAtWarn: a 5xx that is an expected,
// retryable state (503 too_many_uploads, 503 shutting_down) is logged at
// WARN, once, and a 501 (a feature this server lacks) at INFO like a 4xx,
// not at ERROR, which is kept for failures someone must look into: every
// rolling restart or full upload queue paged as a server failure.
func TestExpectedUnavailableLoggedAtWarn(t *testing.T) {
	var logs syncBuffer
	srv := apitest.Start(t, apitest.Options{
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		API:    func(c *api.Config) { c.Limits.MaxConcurrentUploads = 1 },
	})
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest(http.MethodPut, srv.EntryURL("default", keyOf("held")), pr)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	pw.Write(make([]byte, 64<<10))
	for deadline := time.Now().Add(10 * time.Second); srv.Metric("cachesvc_uploads_in_progress") != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first upload never started")
		}
	}
	resp := srv.Do(http.MethodPut, srv.EntryURL("default", keyOf("second")), strings.NewReader("x"))
	if b := apitest.ReadAll(t, resp); resp.StatusCode != 503 {
		t.Fatalf("second upload: %d %s", resp.StatusCode, b)
	}
	resp = srv.Do(http.MethodPost, srv.URL+"/v1/default/keys", strings.NewReader(`{}`), "Content-Type", "application/json")
	if b := apitest.ReadAll(t, resp); resp.StatusCode != 501 {
		t.Fatalf("keys without a keyer: %d %s", resp.StatusCode, b)
	}
	ctx, cancel := contextWithTimeout(200 * time.Millisecond)
	defer cancel()
	_ = srv.API.Shutdown(ctx) // aborts the held upload: 503 shutting_down
	pw.Close()
	<-done
	got := logLevelsByCode(t, logs.String())
	for code, want := range map[string]string{"too_many_uploads": "WARN request", "shutting_down": "WARN request", "keying_disabled": "INFO request"} {
		if len(got[code]) != 1 || got[code][0] != want {
			t.Errorf("%s logged as %q, want once as %q", code, got[code], want)
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", logs.String())
	}
}
