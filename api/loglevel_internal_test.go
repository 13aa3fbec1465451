package api

import (
	"log/slog"
	"testing"
)

func TestFailureLevel(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		want   slog.Level
	}{
		{500, "internal_error", slog.LevelError},
		{500, "integrity_failure", slog.LevelError},
		{507, "store_full", slog.LevelError},
		{503, "plugins_failed", slog.LevelError},
		{503, "some_new_code", slog.LevelError},
		{503, "shared_tier_unavailable", slog.LevelWarn},
		{503, "shutting_down", slog.LevelWarn},
		{503, "starting", slog.LevelWarn},
		{503, "too_many_uploads", slog.LevelWarn},
		{503, "upload_queue_full", slog.LevelWarn},
		{503, "data_dir_unavailable", slog.LevelWarn},
		{507, "quota_exceeded", slog.LevelWarn},
		{501, "keying_disabled", slog.LevelInfo},
		{501, "unsupported_transfer_encoding", slog.LevelInfo},
	} {
		if got := failureLevel(tc.status, tc.code); got != tc.want {
			t.Errorf("failureLevel(%d, %s) = %s, want %s", tc.status, tc.code, got, tc.want)
		}
	}
}
