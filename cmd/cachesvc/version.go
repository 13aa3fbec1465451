package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3".
var version = "dev"

// versionString returns the version, the VCS revision when the binary was
// built from a checkout, and the Go version.
func versionString() string {
	rev := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " (" + s.Value[:12] + ")"
			}
		}
	}
	return fmt.Sprintf("cachesvc %s%s %s", version, rev, runtime.Version())
}

// runVersion prints the version.
func runVersion(ctx context.Context, args []string, sio stdio) error {
	fs := newFlagSet("version", "Print the version, and the store format (--data) and shared-tier entry record versions this binary reads: compare them before rolling back to an older binary.", sio)
	if err := parseOperandless(fs, args, sio); err != nil {
		return err
	}
	fmt.Fprintln(sio.Stdout, versionString())
	fmt.Fprintln(sio.Stdout, dataFormats())
	return nil
}

// dataFormats names the data formats this binary reads and writes, so that
// an operator can tell before a rollback whether an older binary reads
// what a newer one wrote (README, "Upgrading and rolling back").
func dataFormats() string {
	return fmt.Sprintf("store format %d (--data), shared-tier entry records up to v%d", store.FormatVersion, s3.MaxRecordVersion)
}
