package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/wire"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3". Left empty, appVersion reads one from
// the binary's build information.
var version string

// appVersion is the version this binary reports everywhere: `cachesvc
// version`, /healthz, /v1/stats, cachesvc_build_info and fleet heartbeats
// (resolveVersion).
var appVersion = sync.OnceValue(func() string {
	bi, _ := debug.ReadBuildInfo()
	return resolveVersion(version, bi)
})

// resolveVersion returns ldflags when -X set it, else the version Go
// recorded in bi: the module's version when installed as
// `go install module@v1.2.3`, or, for a `go build` in a git checkout, the
// pseudo-version Go 1.24 and later give it, v0.0.0-<commit time>-<12 hex of
// the revision>[+dirty], which resolveVersion builds from the vcs.*
// settings itself where Go recorded only "(devel)". Every replica built
// without -ldflags reported "dev" before, so a fleet's versions could not
// be told apart. The pseudo-version is what `go version -m` prints and
// what Go's tooling compares: it orders by commit time, sorts below any
// tagged release, and +dirty (a build with uncommitted changes) is
// metadata, so it compares equal to its commit. "dev" remains for a binary
// that has no VCS information: `go run` stamps none, nor `go build
// -buildvcs=false` or a build outside a checkout.
func resolveVersion(ldflags string, bi *debug.BuildInfo) string {
	if ldflags != "" {
		return ldflags
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, at, modified := vcsSettings(bi)
	if len(rev) < 12 {
		return "dev"
	}
	// Without a commit time (none recorded) it reads 00010101000000:
	// nothing to order by, but the revision is still told apart.
	t, _ := time.Parse(time.RFC3339Nano, at)
	v := "v0.0.0-" + t.UTC().Format("20060102150405") + "-" + rev[:12]
	if modified {
		v += "+dirty"
	}
	return v
}

// versionString returns the version, the VCS revision when the binary was
// built from a checkout and the version does not already name it, and the
// Go version.
func versionString() string {
	v, rev := appVersion(), ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if r, _, _ := vcsSettings(bi); len(r) >= 12 && !strings.Contains(v, r[:12]) {
			rev = " (" + r[:12] + ")"
		}
	}
	return fmt.Sprintf("cachesvc %s%s %s", v, rev, runtime.Version())
}

// vcsSettings returns what Go recorded in bi of the checkout the binary
// was built in: its revision, commit time and whether it had uncommitted
// changes; empty when it recorded none.
func vcsSettings(bi *debug.BuildInfo) (rev, at string, modified bool) {
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return rev, at, modified
}

// runVersion prints the version.
func runVersion(ctx context.Context, args []string, sio stdio) error {
	fs := newFlagSet("version", "Print the version, the store format (--data) and shared-tier entry record versions this binary reads, and the stats format it writes and reads: compare them before rolling back to an older binary, or running an older cachesvc stats against it.", sio)
	if err := parseOperandless(fs, args, sio); err != nil {
		return err
	}
	fmt.Fprintln(sio.Stdout, versionString())
	fmt.Fprintln(sio.Stdout, dataFormats())
	fmt.Fprintln(sio.Stdout, statsFormats())
	return nil
}

// statsFormats names the stats answer's format (wire.StatsFormat): what
// this binary's server writes and the newest its stats command reads. It
// changes where the data formats do not, and an older stats command
// against a newer server prints fewer figures, some of them wrong (README,
// "Upgrading and rolling back").
func statsFormats() string {
	return fmt.Sprintf("stats format %d (GET /v1/stats; stats reads formats 1 to %d)", wire.StatsFormat, wire.StatsFormat)
}

// dataFormats names the data formats this binary reads and writes, so that
// an operator can tell before a rollback whether an older binary reads
// what a newer one wrote (README, "Upgrading and rolling back").
func dataFormats() string {
	return fmt.Sprintf("store format %d (--data), shared-tier entry records up to v%d", store.FormatVersion, s3.MaxRecordVersion)
}
