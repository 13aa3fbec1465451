package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// TestStoppedBy: after SIGINT or SIGTERM, a command run once exits
// 128 + the signal whatever it returned; a daemon only when the signal cut
// it short, its clean stop being a success and its own failure a failure.
func TestStoppedBy(t *testing.T) {
	in := interrupt{sig: syscall.SIGTERM}
	cut := fmt.Errorf("open store: %w", in) // what a cancelled context reads as
	own := errors.New("close store: disk full")
	tests := []struct {
		name   string
		err    error
		daemon bool
		want   bool
	}{
		{"command finished anyway", nil, false, true},
		{"command cut short", cut, false, true},
		{"command failed meanwhile", own, false, true},
		{"daemon stopped cleanly", nil, true, false},
		{"daemon cut short while starting", cut, true, true},
		{"daemon cut short, plain cancellation", fmt.Errorf("listen: %w", context.Canceled), true, true},
		{"daemon failed while stopping", own, true, false},
	}
	for _, tc := range tests {
		if got := stoppedBy(tc.err, tc.daemon); got != tc.want {
			t.Errorf("%s: stoppedBy = %v, want %v", tc.name, got, tc.want)
		}
	}
	if in.exitCode() != 143 || (interrupt{sig: syscall.SIGINT}).exitCode() != 130 {
		t.Errorf("exit codes %d, %d; want 143 and 130", in.exitCode(), interrupt{sig: syscall.SIGINT}.exitCode())
	}
	if !errors.Is(cut, context.Canceled) || cut.Error() != "open store: interrupted by SIGTERM" {
		t.Errorf("the cause reads %q and is context.Canceled: %v", cut, errors.Is(cut, context.Canceled))
	}
}
