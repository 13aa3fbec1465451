package store_test

import (
	"log/slog"
	"testing"
)

// testLogger logs to the test at warning level and above.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// quietLogger discards logs.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
