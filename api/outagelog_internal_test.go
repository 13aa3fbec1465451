package api

import (
	"testing"
	"time"
)

// TestOutageLogDue checks the throttle alone: per code, one line per
// interval, and the next one counts the lines demoted since.
func TestOutageLogDue(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	l := outageLog{every: 10 * time.Second}
	for i, tc := range []struct {
		code        string
		at          time.Duration // after t0
		wantOK      bool
		wantDemoted int
	}{
		{"shared_tier_unavailable", 0, true, 0},
		{"shared_tier_unavailable", time.Second, false, 0},
		{"fleet_unavailable", time.Second, true, 0}, // another cause: its own interval
		{"shared_tier_unavailable", 9 * time.Second, false, 0},
		{"shared_tier_unavailable", 10 * time.Second, true, 2},
		{"shared_tier_unavailable", 11 * time.Second, false, 0},
		{"fleet_unavailable", time.Minute, true, 0},
		{"shared_tier_unavailable", time.Hour, true, 1},
	} {
		demoted, ok := l.due(tc.code, t0.Add(tc.at))
		if ok != tc.wantOK || demoted != tc.wantDemoted {
			t.Errorf("%d: due(%s, +%s) = %d, %v; want %d, %v", i, tc.code, tc.at, demoted, ok, tc.wantDemoted, tc.wantOK)
		}
	}
}
