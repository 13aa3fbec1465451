package api_test

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/store"
)

// TestReadyz checks /readyz is 200 while the store is open and 503
// not_ready once it is closed, while /healthz stays 200.
func TestReadyz(t *testing.T) {
	st, err := store.Open(store.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) int {
		resp, err := srv.App().Test(httptest.NewRequest("GET", path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/readyz"); got != 200 {
		t.Errorf("/readyz with the store open = %d, want 200", got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if got := get("/readyz"); got != 503 {
		t.Errorf("/readyz with the store closed = %d, want 503", got)
	}
	if got := get("/healthz"); got != 200 {
		t.Errorf("/healthz = %d, want 200", got)
	}
}

// TestReadyzWhileDraining checks Drain: /readyz answers 503 shutting_down
// while /healthz and the entries are still served, and every answer closes
// its connection so that kept-alive clients move elsewhere.
func TestReadyzWhileDraining(t *testing.T) {
	st, err := store.Open(store.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := api.New(api.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("ab", 32)
	if resp, err := srv.App().Test(httptest.NewRequest("PUT", "/v1/default/entries/"+key, strings.NewReader("exe")), -1); err != nil || resp.StatusCode != 201 {
		t.Fatalf("PUT before draining: %v %v", resp, err)
	}
	srv.Drain()
	tests := []struct {
		method, path string
		status       int
		code         string // the error code, for an error
	}{
		{"GET", "/readyz", 503, "shutting_down"},
		{"GET", "/healthz", 200, ""},
		{"GET", "/v1/default/entries/" + key, 200, ""},
		{"PUT", "/v1/default/entries/" + strings.Repeat("cd", 32), 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp, err := srv.App().Test(httptest.NewRequest(tt.method, tt.path, strings.NewReader("exe")), -1)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct{ Error struct{ Code string } }
			json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tt.status || body.Error.Code != tt.code {
				t.Errorf("while draining: %d %q, want %d %q", resp.StatusCode, body.Error.Code, tt.status, tt.code)
			}
			if !resp.Close {
				t.Errorf("while draining the answer keeps its connection open; want Connection: close")
			}
		})
	}
}

// TestProbeNotReadyIsNotAnError checks that a /readyz 503 (the server
// draining, here) is logged at debug, not as a failed request at ERROR:
// probes answer it every second of a start or a rolling restart.
func TestProbeNotReadyIsNotAnError(t *testing.T) {
	st, err := store.Open(store.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var logs syncBuffer
	srv, err := api.New(api.Config{Store: st, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	srv.Drain()
	resp, err := srv.App().Test(httptest.NewRequest("GET", "/readyz", nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("/readyz while draining = %d, want 503", resp.StatusCode)
	}
	if l := logs.String(); strings.Contains(l, `"level":"ERROR"`) {
		t.Errorf("a not-ready probe is logged as an error:\n%s", l)
	}
}
