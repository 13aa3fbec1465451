package main

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
)

func TestServePprof(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	addr, stop, err := servePprof("127.0.0.1:0", logger)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /debug/pprof/cmdline = %d, want 200", resp.StatusCode)
	}
	if _, _, err := servePprof("127.0.0.1:-1", logger); err == nil {
		t.Error("servePprof on a bad address succeeded")
	}
}
