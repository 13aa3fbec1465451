package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

// TestStatsSharedTierNotCounted runs `cachesvc stats` against a fleet
// replica (real server, tiered store over a real versitygw bucket) before
// its first listing of the bucket, after a failed one and after one that
// finished. It printed "Shared tier 0 B in 0 entries" until the listing,
// as if the bucket were empty; after it, the line gives the listing's age
// (it gave none), and the interval only when the server says it.
func TestStatsSharedTierNotCounted(t *testing.T) {
	srv3 := s3test.Start(t)
	srv, shared := statstest.StartReplica(t, srv3, 0)
	stats := func() string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"stats", "--url", srv.URL}, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		return stdout.String()
	}
	check := func(when, out, want, not string) {
		t.Helper()
		if !strings.Contains(out, want) || strings.Contains(out, not) {
			t.Errorf("%s: output lacks %q or has %q:\n%s", when, want, not, out)
		}
	}
	out := stats()
	check("before the first listing", out, "Shared tier: not yet listed by this replica, not counted yet (first listing of the bucket pending)", "Shared tier 0 B")
	// The bucket may hold the other replicas' entries.
	check("before the first listing", out, "Hot tier    0 B in 0 entries", "The cache is empty")

	srv3.Pause(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := shared.ScanUsage(ctx)
	cancel()
	srv3.Resume(t)
	if err == nil {
		t.Fatal("a listing of a paused bucket succeeded")
	}
	check("after a failed listing", stats(), "Shared tier: not yet listed by this replica, not counted yet (first listing of the bucket failing: list entries s3://", "Shared tier 0 B")

	if err := shared.ScanUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	out = stats()
	check("after a listing", out, "Shared tier 0 B in 0 entries (no limit), the fleet's as this replica listed it ", "not counted")
	// This replica lists the bucket only when the test says: no interval
	// to give, where the line said "every 10 minutes" whatever it was.
	check("after a listing", out, ", plus its own writes since; 0 integrity failures", "every 10 minutes")
	check("after a listing", out, "listed it ", "last counted them")
}
