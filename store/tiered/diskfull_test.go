package tiered

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/cachesvc/cachesvc/store"
)

// TestDiskFull checks which write errors of the upload queue become
// store.ErrFull (a 507 that says what to free) rather than an internal
// error: out of space or out of quota, however wrapped; nothing else.
func TestDiskFull(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantFull bool
	}{
		{"no space", &fs.PathError{Op: "write", Path: "/q/tmp-1.body.tmp", Err: syscall.ENOSPC}, true},
		{"quota", &fs.PathError{Op: "write", Path: "/q/tmp-1.body.tmp", Err: syscall.EDQUOT}, true},
		{"permission", &fs.PathError{Op: "open", Path: "/q/tmp-1.body.tmp", Err: syscall.EACCES}, false},
		{"mismatch", store.ErrSizeMismatch, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := diskFull("/q", tt.err)
			if got := errors.Is(err, store.ErrFull); got != tt.wantFull {
				t.Fatalf("diskFull(%v) = %v: ErrFull %v, want %v", tt.err, err, got, tt.wantFull)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("diskFull(%v) = %v lost its cause", tt.err, err)
			}
			if tt.wantFull && !strings.Contains(err.Error(), "free space on that disk") {
				t.Errorf("diskFull(%v) = %v does not say what to do", tt.err, err)
			}
		})
	}
}
